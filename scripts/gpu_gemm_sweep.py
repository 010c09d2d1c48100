#!/usr/bin/env python3
"""Measures cuBLAS GEMM time over the shapes a tensor-parallel Transformer layer runs, on the
GPU this runs on (a calibration run for the simulator's GEMM efficiency; docs/gpu/README.md).

For each hidden size h, tensor-parallel degree t and token count m (micro-batch x sequence), the
four GEMMs of a GPT layer's forward pass as Megatron-LM splits them: QKV (k = h, n = 3h/t),
attention projection (k = h/t, n = h), FC1 (k = h, n = 4h/t) and FC2 (k = 4h/t, n = h); plus
square GEMMs. Each is timed with CUDA events by triton.testing.do_bench (median, L2 cache flushed
between runs) on random inputs, in bf16 (fp32 accumulation) and in fp32 with and without
TF32. Writes CSV to stdout (or --out): dtype, kind, h, t, m, n, k, ms, tflops.

Usage: python3 scripts/gpu_gemm_sweep.py [--out FILE] [--quick]
"""
import argparse
import csv
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="CSV file (default: stdout)")
    ap.add_argument("--quick", action="store_true", help="bf16 only, fewer shapes")
    args = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("gpu_gemm_sweep: no CUDA device visible", file=sys.stderr)
        return 2
    try:
        from triton.testing import do_bench
    except ImportError:  # events by hand, median of 30 after 5 warm-ups
        from gpu_common import cuda_event_median_ms

        def do_bench(fn, warmup=0, rep=0, return_mode="median"):
            return cuda_event_median_ms(torch, fn, warmup=5, repeats=30)

    dev = torch.device("cuda")
    dtypes = [("bf16", torch.bfloat16, False), ("fp32", torch.float32, False),
              ("tf32", torch.float32, True)]
    hs = [1024, 2048, 4096, 8192]
    ts = [1, 2, 4, 8]
    ms = [128, 512, 2048, 8192, 16384]
    if args.quick:
        dtypes, hs, ms = dtypes[:1], [2048, 8192], [512, 8192]

    shapes = []
    for h in hs:
        for t in ts:
            for m in ms:
                shapes += [("qkv", h, t, m, 3 * h // t, h), ("proj", h, t, m, h, h // t),
                           ("fc1", h, t, m, 4 * h // t, h), ("fc2", h, t, m, h, 4 * h // t)]
    for s in [256, 512, 1024, 2048, 4096, 8192, 16384]:
        shapes.append(("square", 0, 1, s, s, s))

    out = open(args.out, "w", newline="") if args.out else sys.stdout
    w = csv.writer(out)
    w.writerow(["dtype", "kind", "h", "t", "m", "n", "k", "ms", "tflops"])
    props = torch.cuda.get_device_properties(dev)
    print(f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
          f"cuBLAS via torch.matmul", file=sys.stderr)
    start = time.time()
    for name, dtype, tf32 in dtypes:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for kind, h, t, m, n, k in shapes:
            if name in ("fp32", "tf32") and m * n * k > 2**40:
                continue  # the largest fp32 products take seconds each and say nothing new
            a = torch.randn(m, k, device=dev, dtype=dtype)
            b = torch.randn(k, n, device=dev, dtype=dtype)
            ms_ = do_bench(lambda: torch.matmul(a, b), warmup=10, rep=40, return_mode="median")
            w.writerow([name, kind, h, t, m, n, k, f"{ms_:.5f}", f"{2 * m * n * k / ms_ / 1e9:.1f}"])
        out.flush()
        print(f"# {name} done at {time.time() - start:.0f} s", file=sys.stderr)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 0


if __name__ == "__main__":
    sys.exit(main())
