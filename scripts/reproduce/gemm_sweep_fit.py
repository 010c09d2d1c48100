#!/usr/bin/env python3
"""Reads a GEMM sweep (scripts/gpu_gemm_sweep.py's CSV) and reports how well GEMM time models
predict it: the simulator's built-in efficiency table (runtime/sim/calibration.cpp: efficiency
by the smallest dimension, times the peak, against the memory roofline), and a three-parameter
model fitted on half of the shapes and scored on the other half:

    t = t0 + max(flops / (peak * e), bytes / (bw * e_bw))

t0: a GEMM's fixed time on the device (launch, ramp-up and tail of one kernel); e: the fraction
of peak a large GEMM reaches; e_bw: that of HBM bandwidth. One t0 per device, e per dtype.
Shapes of hidden size 1024 and 4096 fit, 2048 and 8192 (and the square ones) score.

Usage: python3 scripts/reproduce/gemm_sweep_fit.py docs/gpu/h200-2026-11-27/gemm_sweep.csv
       [--peak-bf16 TF] [--peak-tf32 TF] [--peak-fp32 TF] [--bw GB/s]
Defaults: the H200 SXM datasheet (dense 989.4 / 494.7 / 67 TFLOP/s, 4,800 GB/s).
"""
import argparse
import csv
import statistics

BUILTIN = [(0, 0.10), (16, 0.20), (64, 0.35), (128, 0.50), (256, 0.60), (512, 0.68),
           (1024, 0.74), (2048, 0.78), (4096, 0.80)]  # runtime/sim/calibration.cpp
ELEM = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}


def builtin_eff(min_dim):
    e = BUILTIN[0][1]
    for threshold, v in BUILTIN:
        if min_dim >= threshold:
            e = v
    return e


def bucket(min_dim):
    return max(t for t, _ in BUILTIN if t <= min_dim)


def summary(ratios):
    r = sorted(ratios)
    err = sorted(abs(x - 1) for x in r)
    return (f"n={len(r):3d}  predicted/measured median {statistics.median(r):.2f} "
            f"(p10 {r[len(r) // 10]:.2f}, p90 {r[9 * len(r) // 10]:.2f}); "
            f"|error| median {100 * statistics.median(err):.1f} %, "
            f"p90 {100 * err[9 * len(err) // 10]:.1f} %")


def by_smallest_dimension(rows, ratios):
    by = {}
    for r, x in zip(rows, ratios):
        by.setdefault(bucket(min(r["m"], r["n"], r["k"])), []).append(x)
    return "by smallest dimension: " + ", ".join(
        f">={b}: {statistics.median(v):.2f}" for b, v in sorted(by.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--peak-bf16", type=float, default=989.4)
    ap.add_argument("--peak-tf32", type=float, default=494.7)
    ap.add_argument("--peak-fp32", type=float, default=67.0)
    ap.add_argument("--bw", type=float, default=4800.0)
    a = ap.parse_args()
    peak = {"bf16": a.peak_bf16 * 1e12, "fp16": a.peak_bf16 * 1e12,
            "tf32": a.peak_tf32 * 1e12, "fp32": a.peak_fp32 * 1e12}
    bw = a.bw * 1e9
    rows = []
    for r in csv.DictReader(open(a.csv)):
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        rows.append(dict(dtype=r["dtype"], h=int(r["h"]), m=m, n=n, k=k,
                         t=float(r["ms"]) * 1e-3, flops=2.0 * m * n * k,
                         bytes=ELEM[r["dtype"]] * (m * k + k * n + m * n)))
    dtypes = [d for d in ("bf16", "fp16", "tf32", "fp32") if any(r["dtype"] == d for r in rows)]

    print("Built-in table (efficiency by smallest dimension, roofline), no fit:")
    for d in dtypes:
        rs = [r for r in rows if r["dtype"] == d]
        ratios = [max(r["flops"] / (peak[d] * builtin_eff(min(r["m"], r["n"], r["k"]))),
                      r["bytes"] / bw) / r["t"] for r in rs]
        print(f"  {d}: {summary(ratios)}")
        print("    " + by_smallest_dimension(rs, ratios))

    def predict(r, t0, e, e_bw):
        return t0 + max(r["flops"] / (peak[r["dtype"]] * e), r["bytes"] / (bw * e_bw))

    fit_rows = [r for r in rows if r["h"] in (1024, 4096)]
    score_rows = [r for r in rows if r["h"] not in (1024, 4096)]

    def loss(rs, t0, effs, e_bw):  # median squared log error
        return statistics.median((predict(r, t0, effs[r["dtype"]], e_bw) / r["t"] - 1) ** 2
                                 for r in rs)

    # Grid search (few parameters, no dependency): t0 in 0..12 us, e_bw in 0.5..1, each dtype's
    # e in 0.3..0.95, alternating until nothing moves.
    t0, e_bw = 5e-6, 0.8
    effs = {d: 0.7 for d in dtypes}
    for _ in range(4):
        t0 = min((x * 0.25e-6 for x in range(0, 49)),
                 key=lambda x: loss(fit_rows, x, effs, e_bw))
        e_bw = min((0.5 + 0.01 * x for x in range(51)), key=lambda x: loss(fit_rows, t0, effs, x))
        for d in dtypes:
            rs = [r for r in fit_rows if r["dtype"] == d]
            effs[d] = min((0.3 + 0.005 * x for x in range(131)),
                          key=lambda x: loss(rs, t0, {**effs, d: x}, e_bw))
    print(f"\nFitted on hidden 1024 and 4096: t0 = {t0 * 1e6:.2f} us, e_bw = {e_bw:.2f}, " +
          ", ".join(f"e[{d}] = {effs[d]:.3f}" for d in dtypes))
    for label, rs in (("fit shapes", fit_rows), ("scored shapes (hidden 2048, 8192, square)",
                                                 score_rows)):
        print(f"  {label}:")
        for d in dtypes:
            sub = [r for r in rs if r["dtype"] == d]
            ratios = [predict(r, t0, effs[d], e_bw) / r["t"] for r in sub]
            print(f"    {d}: {summary(ratios)}")
            print("      " + by_smallest_dimension(sub, ratios))


if __name__ == "__main__":
    main()
