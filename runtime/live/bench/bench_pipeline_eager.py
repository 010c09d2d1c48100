#!/usr/bin/python3
"""PyTorch eager side of `shardgym bench pipeline`: the same pipeline in plain Python PyTorch.

RANKS processes (torch.distributed over Gloo, one stage each, the layers split evenly), the
GPT of bench_live_eager.py (same model, initialisation, AdamW and global-norm clipping), run
as 1F1B or GPipe over M micro-batches in the order of Megatron-LM's schedules.py, each
transfer a torch.distributed.batch_isend_irecv of the sends and receives one call of
p2p_communication.py posts together. Activations travel whole: one stage per rank, no
tensor parallelism inside a stage. --gemm onednn (default) gives eager the C++ side's float32
products (dnnl_sgemm through ctypes, bench_live_eager.py); --gemm matmul writes `@`.

Prints one JSON object: {"step_s": [slowest rank's wall s per timed step...], "median_s": m,
"torch": version}. Run with Debian's interpreter, which has python3-torch: /usr/bin/python3.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_live_eager import OneDnn, embed, head_loss, init_params, layer  # noqa: E402


def p2p(ops):
    """Posts every (send?, tensor, peer) together and waits for all (p2p_communication.py)."""
    ops = [dist.P2POp(dist.isend if send else dist.irecv, t, peer) for send, t, peer in ops]
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()


def run_stage(rank, args, port, out):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.set_num_threads(1)
    P, m = args.ranks, args.micro_batches
    first, last = rank == 0, rank == P - 1
    dtype = torch.float32
    ffn = 4 * args.hidden
    full = init_params(args.layers, args.hidden, args.heads, ffn, args.seq, args.vocab, dtype,
                       args.seed)
    per = args.layers // P
    mine = range(rank * per, (rank + 1) * per if not last else args.layers)
    keep = {k: t for k, t in full.items()
            if (first and k in ("wte", "wpe")) or (last and k.startswith(("ln_f", "lm_head")))
            or any(k.startswith(f"h.{i}.") for i in mine)}
    decay = [t for t in keep.values() if t.dim() >= 2]
    no_decay = [t for t in keep.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    products = {}
    if args.gemm == "onednn":  # the C++ side's float32 products (bench_live_eager.py)
        gemm = OneDnn()
        products = {"linear": gemm.linear, "batched": gemm.batched}
    rows = args.batch // m
    shape = (rows, args.seq, args.hidden)
    g = torch.Generator().manual_seed(args.seed + 1)
    times = []
    for it in range(args.warmup + args.iters):
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
        targets = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        ins, outs = [None] * m, [None] * m

        def forward(i, x):
            if first:
                x = embed(keep, tokens[i * rows:(i + 1) * rows])
            else:
                x.requires_grad_(True)
                ins[i] = x
            for j in mine:
                x = layer(keep, j, x, args.heads, **products)
            if last:
                outs[i] = head_loss(keep, x, targets[i * rows:(i + 1) * rows],
                                    products.get("linear", torch.matmul)) / m
                return None
            outs[i] = x
            return x.detach()

        def backward(i, grad):
            outs[i].backward() if last else outs[i].backward(grad)
            g_in = None if first else ins[i].grad
            ins[i] = outs[i] = None
            return g_in

        def recv_forward():
            if first:
                return None
            x = torch.empty(shape)
            p2p([(False, x, rank - 1)])
            return x

        def send_forward(y):
            if not last:
                p2p([(True, y, rank + 1)])

        def recv_backward():
            if last:
                return None
            gr = torch.empty(shape)
            p2p([(False, gr, rank + 1)])
            return gr

        def send_backward(gr):
            if not first:
                p2p([(True, gr, rank - 1)])

        if args.schedule == "gpipe":
            for i in range(m):
                send_forward(forward(i, recv_forward()))
            for i in range(m):
                send_backward(backward(i, recv_backward()))
        else:  # schedules.py, forward_backward_pipelining_without_interleaving
            warmup = min(P - rank - 1, m)
            steady = m - warmup
            for i in range(warmup):
                send_forward(forward(i, recv_forward()))
            x = recv_forward() if steady > 0 else None
            for j in range(steady):
                y = forward(warmup + j, x)
                gr = None
                if not last:
                    gr = torch.empty(shape)
                    p2p([(True, y, rank + 1), (False, gr, rank + 1)])
                g_in = backward(j, gr)
                if j == steady - 1:
                    send_backward(g_in)
                elif not first:
                    x = torch.empty(shape)
                    p2p([(True, g_in, rank - 1), (False, x, rank - 1)])
            for i in range(warmup):
                send_backward(backward(steady + i, recv_backward()))
        # Global-norm clipping over every stage's gradients, then AdamW.
        grads = [t.grad for t in keep.values() if t.grad is not None]
        sq = torch.stack([gr.double().pow(2).sum() for gr in grads]).sum().reshape(1)
        dist.all_reduce(sq)
        scale = min(1.0, 1.0 / (float(sq.sqrt()) + 1e-6))
        for gr in grads:
            gr.mul_(scale)
        opt.step()
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if it >= args.warmup:
            times.append(float(elapsed))
    if rank == 0:
        out.put(times)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("ranks", 2), ("micro-batches", 1), ("layers", 4), ("hidden", 128),
                          ("heads", 4), ("seq", 64), ("batch", 8), ("vocab", 256),
                          ("warmup", 2), ("iters", 5), ("seed", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
    ap.add_argument("--gemm", choices=["matmul", "onednn"], default="onednn")
    args = ap.parse_args()
    if args.batch % args.micro_batches or args.layers < args.ranks:
        sys.exit("bench_pipeline_eager.py: m must divide the batch, ranks at most the layers")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    mp.spawn(run_stage, args=(args, free_port(), out), nprocs=args.ranks, join=True)
    times = out.get()
    print(json.dumps({"step_s": times, "median_s": sorted(times)[len(times) // 2],
                      "torch": torch.__version__, "gemm": args.gemm}))


if __name__ == "__main__":
    main()
