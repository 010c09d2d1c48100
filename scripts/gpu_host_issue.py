#!/usr/bin/env python3
"""The host's time to issue a GPT layer's kernels from eager PyTorch, where the GPU's work is
too small to hide it: what the simulator's host figures (`host_kernel_us`, hardware.yaml;
docs/design.md §4, "Host issue") stand for, measured on a plain eager stack
(docs/simulator-fidelity.md, "The host's issue time of an eager GPT layer").

The layers of scripts/gpu_memory_pressure.py (Megatron-LM's unfused GPT layer, no dropout),
forward and backward with AdamW's step excluded, at a small shape. Per layer and step: the
CUDA kernels launched (torch.profiler), the wall-clock time of the step with the GPU
synchronised once at its end, and the kernels' own GPU time; host µs per kernel is the wall
time over the kernel count where the GPU is mostly idle (its busy fraction is printed too).

CSV to stdout or --out: hidden, seq, micro_batch, layers, kernels_per_layer,
wall_ms_per_layer, gpu_ms_per_layer, gpu_busy, host_us_per_kernel
Usage: python3 scripts/gpu_host_issue.py [--out FILE] [--layers 8] [--steps 20]
"""
import argparse
import csv
import statistics
import sys
import time

from gpu_common import cuda_device
from gpu_memory_pressure import build


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="CSV file (default: stdout)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per shape")
    args = ap.parse_args()
    if args.layers < 1 or args.steps < 1:
        print("gpu_host_issue: --layers and --steps must be positive", file=sys.stderr)
        return 2
    found = cuda_device("gpu_host_issue")
    if found is None:
        return 2
    torch, dev = found
    from torch.profiler import ProfilerActivity, profile

    out = open(args.out, "w", newline="") if args.out else sys.stdout
    w = csv.writer(out)
    w.writerow(["hidden", "seq", "micro_batch", "layers", "kernels_per_layer",
                "wall_ms_per_layer", "gpu_ms_per_layer", "gpu_busy", "host_us_per_kernel"])
    def measure(hidden, heads, seq, mb):
        model = build(torch, hidden, args.layers, heads, False, dev, torch.bfloat16)

        def step():
            x = torch.randn(seq, mb, hidden, device=dev, dtype=torch.bfloat16,
                            requires_grad=True)
            model(x).float().square().mean().backward()
            model.zero_grad(set_to_none=True)

        for _ in range(5):
            step()
        torch.cuda.synchronize()
        walls = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        # Each kernel's own time, µs (device_time; cuda_time before PyTorch 2.4).
        gpu_ms = sum(getattr(e, "device_time", None) or getattr(e, "cuda_time", 0)
                     for e in kernels) / 1e3
        return statistics.median(walls), len(kernels), gpu_ms

    # Small shapes (host-bound) up to one where the GPU's work starts to count.
    for hidden, heads, seq, mb in ((256, 4, 128, 1), (1024, 16, 128, 1), (1024, 16, 512, 2),
                                   (2048, 16, 1024, 2)):
        wall, count, gpu_ms = measure(hidden, heads, seq, mb)
        torch.cuda.empty_cache()
        n = count / args.layers
        w.writerow([hidden, seq, mb, args.layers, f"{n:.1f}", f"{wall / args.layers:.4f}",
                    f"{gpu_ms / args.layers:.4f}", f"{gpu_ms / wall:.3f}",
                    f"{wall / args.layers * 1e3 / n:.2f}"])
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
