#!/usr/bin/env python3
"""Measures what a training step pays when it runs near the GPU's memory capacity: the
calibration run the simulator's memory-pressure term waits for (docs/simulator-fidelity.md,
"Memory pressure"; docs/gpu/README.md).

PyTorch's caching allocator keeps freed blocks for reuse. When cudaMalloc fails it frees every
cached block it can (which synchronises the device) and tries again; only when that fails too
does it raise an out-of-memory error (torch.cuda.memory_stats: num_alloc_retries, num_ooms).
Near capacity a step can therefore run, but slower, and how much slower is what this measures.

A stack of GPT layers as Megatron-LM runs them unfused (LayerNorm, QKV, scores, softmax, their
product, projection, LayerNorm, FC1, GeLU, FC2; bf16; causal mask), with or without full
recomputation per layer (torch.utils.checkpoint), trained with AdamW. For each micro-batch:
first the step's allocated and reserved peaks with the whole GPU; then the same step under
caps (torch.cuda.set_per_process_memory_fraction) from well above the reserved peak down to
below the allocated peak, where it fails. Per cap: median step time over the timed steps,
allocator retries and out-of-memory errors per step, and the peaks. CSV to stdout or --out:

  mode, recompute, micro_batch, cap_gib, cap_over_allocated, allocated_gib, reserved_gib,
  step_ms, step_over_uncapped, retries_per_step, ooms_per_step, status

Run it once as is and once with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the mode
column says which): expandable segments let the allocator grow a segment instead of keeping
many of fixed sizes, which is what Megatron-LM's runs near capacity are advised to use.

Usage: python3 scripts/gpu_memory_pressure.py [--out FILE] [--quick] [--hidden H] [--layers L]
           [--micro-batches B...] [--fractions F...] [--steps N]
       python3 scripts/gpu_memory_pressure.py --dry-run   (one step on the CPU: checks the code)
"""
import argparse
import csv
import math
import os
import statistics
import sys
import time

from gpu_common import cuda_device


def build(torch, hidden, layers, heads, recompute, device, dtype):
    nn = torch.nn
    # Parameters made on the device itself: a CPU initialisation of a billion parameters would
    # take longer than the steps measured on them.
    kw = {"device": device, "dtype": dtype}

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(hidden, **kw)
            self.qkv = nn.Linear(hidden, 3 * hidden, **kw)
            self.proj = nn.Linear(hidden, hidden, **kw)
            self.ln2 = nn.LayerNorm(hidden, **kw)
            self.fc1 = nn.Linear(hidden, 4 * hidden, **kw)
            self.fc2 = nn.Linear(4 * hidden, hidden, **kw)

        def attention(self, x):
            s, b, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(s, b, heads, 3 * hidden // heads).chunk(3, dim=-1)
            q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, d]
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            ctx = torch.matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, hidden)
            return x + self.proj(ctx)

        def forward(self, x):
            x = self.attention(x)
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(layers))

        def forward(self, x):
            for layer in self.layers:
                if recompute:
                    from torch.utils.checkpoint import checkpoint
                    x = checkpoint(layer, x, use_reentrant=False)
                else:
                    x = layer(x)
            return x

    return Stack()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="CSV file (default: stdout)")
    ap.add_argument("--quick", action="store_true", help="one micro-batch, fewer caps")
    ap.add_argument("--dry-run", action="store_true", help="one small step on the CPU and exit")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per cap (after 2 warm-up)")
    ap.add_argument("--micro-batches", type=int, nargs="+",
                    help="micro-batches to measure (default 1 2 4 8; --quick: 4)")
    ap.add_argument("--fractions", type=float, nargs="+",
                    help="caps as multiples of the uncapped step's allocated peak "
                         "(default 1.6 1.3 1.15 1.08 1.04 1.02 1.0 0.98 0.95)")
    args = ap.parse_args()

    import torch
    if args.dry_run:
        model = build(torch, 64, 2, 4, True, "cpu", torch.float32)
        opt = torch.optim.AdamW(model.parameters())
        x = torch.randn(32, 2, 64, requires_grad=True)
        model(x).float().square().mean().backward()
        opt.step()
        print("gpu_memory_pressure: dry run ok (one step of a 2-layer stack on the CPU)")
        return 0
    found = cuda_device("gpu_memory_pressure")
    if found is None:
        return 2
    _, dev = found
    mode = "expandable" if "expandable_segments:True" in os.environ.get(
        "PYTORCH_CUDA_ALLOC_CONF", "") else "default"
    total = torch.cuda.get_device_properties(dev).total_memory
    gib = float(1 << 30)
    out = open(args.out, "w", newline="") if args.out else sys.stdout
    w = csv.writer(out)
    w.writerow(["mode", "recompute", "micro_batch", "cap_gib", "cap_over_allocated",
                "allocated_gib", "reserved_gib", "step_ms", "step_over_uncapped",
                "retries_per_step", "ooms_per_step", "status"])
    micro_batches = [4] if args.quick else [1, 2, 4, 8]
    fractions_of_peak = [1.6, 1.3, 1.15, 1.08, 1.04, 1.02, 1.0, 0.98, 0.95]
    if args.quick:
        fractions_of_peak = [1.3, 1.08, 1.02, 0.98]
    micro_batches = args.micro_batches or micro_batches
    fractions_of_peak = args.fractions or fractions_of_peak
    if min(micro_batches) < 1 or min(fractions_of_peak) <= 0:
        print("gpu_memory_pressure: micro-batches and fractions must be positive", file=sys.stderr)
        return 2

    def one_config(recompute, mb, cap):
        """Median step time (ms), retries and OOMs per step, peaks; None where it failed."""
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        torch.cuda.reset_accumulated_memory_stats(dev)
        model = opt = x = None
        try:
            model = build(torch, args.hidden, args.layers, args.heads, recompute, dev,
                          torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
            times = []
            for step in range(2 + args.steps):
                x = torch.randn(args.seq, mb, args.hidden, device=dev, dtype=torch.bfloat16)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(x).float().square().mean().backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                if step >= 2:
                    times.append((time.perf_counter() - t0) * 1e3)
            stats = torch.cuda.memory_stats(dev)
            steps = 2 + args.steps
            return (statistics.median(times), stats.get("num_alloc_retries", 0) / steps,
                    stats.get("num_ooms", 0) / steps,
                    torch.cuda.max_memory_allocated(dev) / gib,
                    torch.cuda.max_memory_reserved(dev) / gib, "ok")
        except torch.cuda.OutOfMemoryError:
            return (float("nan"), float("nan"), float("nan"), float("nan"), float("nan"), "oom")
        finally:
            del model, opt, x
            torch.cuda.empty_cache()

    for recompute in (False, True):
        for mb in micro_batches:
            base = one_config(recompute, mb, total)
            if base[-1] != "ok":
                w.writerow([mode, int(recompute), mb, f"{total / gib:.3f}", "", "", "", "", "",
                            "", "", "oom"])
                continue
            ms0, _, _, alloc0, res0, _ = base
            w.writerow([mode, int(recompute), mb, f"{total / gib:.3f}",
                        f"{total / gib / alloc0:.4f}", f"{alloc0:.3f}", f"{res0:.3f}",
                        f"{ms0:.2f}", "1.0000", f"{base[1]:.2f}", f"{base[2]:.2f}", "ok"])
            for f in fractions_of_peak:
                cap = f * alloc0 * gib
                if cap >= total:
                    continue
                ms, retries, ooms, alloc, res, status = one_config(recompute, mb, cap)
                w.writerow([mode, int(recompute), mb, f"{cap / gib:.3f}", f"{f:.4f}",
                            f"{alloc:.3f}", f"{res:.3f}", f"{ms:.2f}", f"{ms / ms0:.4f}",
                            f"{retries:.2f}", f"{ooms:.2f}", status])
                out.flush()
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
