#!/usr/bin/env python3
"""The memory-bound passes of a training step on this GPU: what the simulator's
`memory_efficiency` (experiments/hardware.yaml) stands for, measured where it is used
(docs/simulator-fidelity.md, "Memory-bound passes on the H200").

Each pass is timed with CUDA events (median of --repeats after 3 warm-ups) over tensors far
larger than the L2 cache, and its bytes counted as the pass must move them at least once:

  copy           a device-to-device copy: read n, write n
  adamw-fused    torch.optim.AdamW(fused=True), fp32 parameters, gradients and moments:
                 reads parameter, gradient and both moments, writes parameter and moments
                 (7 x 4 B per parameter)
  adamw-foreach  the same through the foreach (multi-tensor) path
  clip-norm      torch.nn.utils.clip_grad_norm_ over fp32 gradients: a read for the norm, a
                 read and a write to scale them (3 x 4 B per parameter)
  zero-grad      gradients set to zero in place (1 x 4 B written)

and the effective bandwidth over the board's peak (nvidia-smi / the datasheet figure given
with --peak-gbs) is the efficiency. The tensors are split as a model's are (--tensor-mib
each), since the optimizer's multi-tensor kernels work through lists. Also: the host's time to
issue one tiny CUDA kernel from eager PyTorch (a 1-element add, synchronised once per 1,000),
the floor under the simulator's fitted host_kernel_us.

CSV to stdout or --out: pass, params, tensors, bytes, ms, gbs, efficiency
Usage: python3 scripts/gpu_stream_bench.py [--out FILE] [--params N] [--peak-gbs 4800]
"""
import argparse
import csv
import statistics
import sys
import time

from gpu_common import cuda_device, cuda_event_median_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="CSV file (default: stdout)")
    ap.add_argument("--params", type=float, default=1e9, help="parameters (default 1e9: 4 GB fp32)")
    ap.add_argument("--tensor-mib", type=float, default=64, help="size of each tensor (MiB)")
    ap.add_argument("--peak-gbs", type=float, default=4800,
                    help="the board's memory bandwidth, GB/s (default: the H200 datasheet's)")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    if args.params < 1e6 or args.tensor_mib <= 0 or args.peak_gbs <= 0 or args.repeats < 1:
        print("gpu_stream_bench: --params >= 1e6, positive --tensor-mib, --peak-gbs, --repeats",
              file=sys.stderr)
        return 2
    found = cuda_device("gpu_stream_bench")
    if found is None:
        return 2
    torch, dev = found
    per = max(1, int(args.tensor_mib * (1 << 20) / 4))
    count = max(1, int(args.params // per))
    n = count * per
    params = [torch.randn(per, device=dev, requires_grad=True) for _ in range(count)]
    for p in params:
        p.grad = torch.randn_like(p)

    def timed(fn):
        return cuda_event_median_ms(torch, fn, warmup=3, repeats=args.repeats)

    out = open(args.out, "w", newline="") if args.out else sys.stdout
    w = csv.writer(out)
    w.writerow(["pass", "params", "tensors", "bytes", "ms", "gbs", "efficiency"])

    def row(name, nbytes, ms):
        gbs = nbytes / (ms * 1e-3) / 1e9
        w.writerow([name, n, count, int(nbytes), f"{ms:.4f}", f"{gbs:.1f}",
                    f"{gbs / args.peak_gbs:.4f}"])
        out.flush()

    def copy_pass():
        src = torch.empty(n, device=dev)
        dst = torch.empty_like(src)
        return timed(lambda: dst.copy_(src))

    row("copy", 2 * 4 * n, copy_pass())
    for name, kw in (("adamw-fused", {"fused": True}), ("adamw-foreach", {"foreach": True})):
        opt = torch.optim.AdamW(params, lr=1e-6, **kw)
        row(name, 7 * 4 * n, timed(opt.step))
        del opt
        torch.cuda.empty_cache()
    row("clip-norm", 3 * 4 * n,
        timed(lambda: torch.nn.utils.clip_grad_norm_(params, 1e9, foreach=True)))
    row("zero-grad", 4 * n, timed(lambda: torch._foreach_zero_([p.grad for p in params])))

    # The host's issue time of one tiny kernel: 1,000 adds, one synchronisation.
    x = torch.zeros(1, device=dev)
    issue = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(1000):
            x.add_(1)
        torch.cuda.synchronize()
        issue.append((time.perf_counter() - t0) * 1e3)
    w.writerow(["host-issue-1000-adds", 1, 1, 4000, f"{statistics.median(issue):.4f}", "", ""])
    return 0


if __name__ == "__main__":
    sys.exit(main())
