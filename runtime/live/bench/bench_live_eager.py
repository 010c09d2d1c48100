#!/usr/bin/python3
"""PyTorch eager side of `shardgym bench live`: the live GPT in plain Python PyTorch.

Same model as runtime/live/tp/reference_gpt.cpp (pre-LN decoder, causal multi-head attention
with head-major QKV columns, exact-erf GELU MLP, untied LM head, mean token cross-entropy),
the same initialisation scheme (N(0, 0.02^2), output projections / sqrt(2 layers)), AdamW
with decoupled decay on matrices only, global-norm clipping, the same shapes and intra-op
threads. Random token batches: the step time does not depend on the text.

--gemm matmul (default) writes the products as a user would, `@` (torch.matmul).
--gemm onednn allows eager the C++ side's trick (runtime/live/tp/gemm.h): float32 products
through oneDNN's dnnl_sgemm, from the libdnnl torch itself loaded, called with ctypes inside
autograd Functions (forward and backward), so readers can see both comparisons.

Prints one JSON object: {"step_s": [wall s...], "cpu_s": [process CPU s...], "median_s": m,
"threads": n, "torch": version, "gemm": "matmul" or "onednn"}.
Run with Debian's interpreter, which has python3-torch: /usr/bin/python3.
"""
import argparse
import ctypes
import json
import math
import os
import time

import torch
import torch.nn.functional as F


def init_params(layers, hidden, heads, ffn, seq, vocab, dtype, seed):
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std=0.02):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).to(dtype)

    out_std = 0.02 / math.sqrt(2 * layers)
    p = {"wte": normal(vocab, hidden), "wpe": normal(seq, hidden)}
    for i in range(layers):
        a, m = f"h.{i}.attn.", f"h.{i}.mlp."
        p[a + "ln.weight"] = torch.ones(hidden, dtype=dtype)
        p[a + "ln.bias"] = torch.zeros(hidden, dtype=dtype)
        p[a + "qkv.weight"] = normal(hidden, 3 * hidden)
        p[a + "qkv.bias"] = torch.zeros(3 * hidden, dtype=dtype)
        p[a + "proj.weight"] = normal(hidden, hidden, std=out_std)
        p[a + "proj.bias"] = torch.zeros(hidden, dtype=dtype)
        p[m + "ln.weight"] = torch.ones(hidden, dtype=dtype)
        p[m + "ln.bias"] = torch.zeros(hidden, dtype=dtype)
        p[m + "fc1.weight"] = normal(hidden, ffn)
        p[m + "fc1.bias"] = torch.zeros(ffn, dtype=dtype)
        p[m + "fc2.weight"] = normal(ffn, hidden, std=out_std)
        p[m + "fc2.bias"] = torch.zeros(hidden, dtype=dtype)
    p["ln_f.weight"] = torch.ones(hidden, dtype=dtype)
    p["ln_f.bias"] = torch.zeros(hidden, dtype=dtype)
    p["lm_head.weight"] = normal(hidden, vocab)
    for t in p.values():
        t.requires_grad_(True)
    return p


class OneDnn:
    """dnnl_sgemm (row-major C = op(A)·op(B)) on float32 CPU tensors, with autograd."""

    def __init__(self):
        try:  # the copy torch loaded; never a second one
            lib = ctypes.CDLL("libdnnl.so.2", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            lib = ctypes.CDLL("libdnnl.so.2")
        self.sgemm = lib.dnnl_sgemm
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.sgemm.argtypes = [ctypes.c_char, ctypes.c_char, i64, i64, i64, ctypes.c_float, ptr,
                               i64, ptr, i64, ctypes.c_float, ptr, i64]
        self.sgemm.restype = ctypes.c_int
        gemm = self

        class Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return gemm.mm(x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[1])

            @staticmethod
            def backward(ctx, dy):
                x, w = ctx.saved_tensors
                dy = dy.reshape(-1, w.shape[1])
                return gemm.mm(dy, w.t()).view(x.shape), gemm.mm(x.reshape(-1, x.shape[-1]).t(), dy)

        class Batched(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return gemm.bmm(a, b)

            @staticmethod
            def backward(ctx, dy):
                a, b = ctx.saved_tensors
                return gemm.bmm(dy, b.transpose(-2, -1)), gemm.bmm(a.transpose(-2, -1), dy)

        self.linear, self.batched = Linear.apply, Batched.apply

    @staticmethod
    def operand(t):
        """A 2-D tensor as (tensor, trans, ld): row-major, or the transpose of one."""
        if t.stride(1) == 1 and t.stride(0) >= max(t.shape[1], 1):
            return t, b"N", t.stride(0)
        if t.stride(0) == 1 and t.stride(1) >= max(t.shape[0], 1):
            return t, b"T", t.stride(1)
        t = t.contiguous()
        return t, b"N", max(t.shape[1], 1)

    def mm(self, a, b, out=None):
        m, k, n = a.shape[0], a.shape[1], b.shape[1]
        a, ta, lda = self.operand(a)
        b, tb, ldb = self.operand(b)
        out = torch.empty(m, n, dtype=torch.float32) if out is None else out
        status = self.sgemm(ta, tb, m, n, k, 1.0, a.data_ptr(), lda, b.data_ptr(), ldb, 0.0,
                            out.data_ptr(), n)
        if status != 0:
            raise RuntimeError(f"dnnl_sgemm failed with status {status}")
        return out

    def bmm(self, a, b):
        batch = a.shape[:-2]
        a3 = a.reshape(-1, *a.shape[-2:])
        b3 = b.reshape(-1, *b.shape[-2:])
        out = torch.empty(a3.shape[0], a3.shape[1], b3.shape[2], dtype=torch.float32)
        for i in range(a3.shape[0]):
            self.mm(a3[i], b3[i], out[i])
        return out.view(*batch, a3.shape[1], b3.shape[2])


def embed(p, tokens):
    return F.embedding(tokens, p["wte"]) + p["wpe"][:tokens.shape[1]].unsqueeze(0)


def layer(p, i, x, heads, linear=torch.matmul, batched=torch.matmul):
    """Layer i (attention block, then MLP block) on the residual stream x [b, s, h]."""
    b, s, h = x.shape
    d = h // heads
    mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
    a, m = f"h.{i}.attn.", f"h.{i}.mlp."
    n = F.layer_norm(x, (h,), p[a + "ln.weight"], p[a + "ln.bias"], 1e-5)
    qkv = (linear(n, p[a + "qkv.weight"]) + p[a + "qkv.bias"]).view(b, s, heads, 3, d)
    q, k, v = (qkv.select(3, j).transpose(1, 2) for j in range(3))
    att = batched(q, k.transpose(-2, -1)) / math.sqrt(d)
    att = torch.softmax(att.masked_fill(mask, float("-inf")), -1)
    o = batched(att, v).transpose(1, 2).reshape(b, s, h)
    x = x + linear(o, p[a + "proj.weight"]) + p[a + "proj.bias"]
    n = F.layer_norm(x, (h,), p[m + "ln.weight"], p[m + "ln.bias"], 1e-5)
    z = F.gelu(linear(n, p[m + "fc1.weight"]) + p[m + "fc1.bias"])
    return x + linear(z, p[m + "fc2.weight"]) + p[m + "fc2.bias"]


def head_loss(p, x, targets, linear=torch.matmul):
    b, s, h = x.shape
    x = F.layer_norm(x, (h,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = linear(x, p["lm_head.weight"])
    return F.cross_entropy(logits.reshape(b * s, -1), targets.reshape(b * s))


def loss_fn(p, tokens, targets, layers, heads, linear=torch.matmul, batched=torch.matmul):
    x = embed(p, tokens)
    for i in range(layers):
        x = layer(p, i, x, heads, linear, batched)
    return head_loss(p, x, targets, linear)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("ffn", 0),
                          ("seq", 128), ("batch", 8), ("vocab", 256), ("threads", 1),
                          ("warmup", 3), ("iters", 10), ("seed", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--gemm", choices=["matmul", "onednn"], default="matmul")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    ffn = args.ffn or 4 * args.hidden
    p = init_params(args.layers, args.hidden, args.heads, ffn, args.seq, args.vocab, dtype,
                    args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        p = {k: t.detach().to(device).requires_grad_(True) for k, t in p.items()}
    decay = [t for t in p.values() if t.dim() >= 2]
    no_decay = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    products = {}
    if args.gemm == "onednn" and dtype == torch.float32:
        gemm = OneDnn()
        products = {"linear": gemm.linear, "batched": gemm.batched}
    g = torch.Generator().manual_seed(args.seed + 1)
    times, cpu = [], []
    for it in range(args.warmup + args.iters):
        tokens = torch.randint(0, 256, (args.batch, args.seq), generator=g)
        targets = torch.randint(0, 256, (args.batch, args.seq), generator=g)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(p, tokens.to(device), targets.to(device), args.layers, args.heads,
                       **products)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), args.clip)
        opt.step()
        loss.item()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if it >= args.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    print(json.dumps({"step_s": times, "cpu_s": cpu, "median_s": sorted(times)[len(times) // 2],
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "gemm": "onednn" if products else "matmul"}))


if __name__ == "__main__":
    main()
