#!/usr/bin/env python3
"""How the ranks of a live run share a step: which rank's figures add up to the step latency.

The simulator prices a step as the sum of its blocks plus the optimizer step plus one per-step
constant fitted by `shardgym calibrate`. That holds only if the block figures calibrate takes
from the live ranks add up, with one constant for the rest, to the step latency it reports
(the slowest rank's step). This script reads the per-rank figures a live run writes with
SHARDGYM_RANK_REPORTS=FILE (one JSON line per training iteration) and prints, plan by plan,
the time the step leaves outside the blocks and the optimizer step under four ways of choosing
the figures:

  slowest-per-block  each block's figures from the rank whose block took longest
  mean               every figure the mean over the ranks
  critical           every figure from the rank whose step is the step latency (the default
                     of LiveRun since 2026-11-25)
  fastest            every figure from the rank whose blocks and optimizer took least

The better choice leaves the most nearly constant time outside: its spread over the plans is
what no per-step constant can absorb. docs/calibration.md, "Which rank's figures".

    SHARDGYM_RANK_REPORTS=runs/x/ranks.jsonl shardgym calibrate CONFIG --out runs/x/calib.yaml
    scripts/reproduce/rank_decomposition.py runs/x/ranks.jsonl
"""
import argparse
import json
import statistics
import sys

CHOICES = ("slowest-per-block", "mean", "critical", "fastest")


def blocks_and_optimizer(rank):
    return sum(sum(b) for b in rank["blocks"]) + rank["optimizer_s"]


def accounted(ranks, choice):
    """Seconds of the step the chosen figures account for (blocks and optimizer step)."""
    if choice == "slowest-per-block":
        total = max(r["optimizer_s"] for r in ranks)
        for b in range(len(ranks[0]["blocks"])):
            total += max(sum(r["blocks"][b]) for r in ranks)
        return total
    if choice == "mean":
        return statistics.mean(blocks_and_optimizer(r) for r in ranks)
    if choice == "critical":
        return blocks_and_optimizer(max(ranks, key=lambda r: r["step_s"]))
    return min(blocks_and_optimizer(r) for r in ranks)


def runs_of(lines):
    """Consecutive iterations of one plan, in order."""
    runs = []
    for d in lines:
        if not runs or runs[-1][0] != d["plan"]:
            runs.append((d["plan"], []))
        runs[-1][1].append(d)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("reports", help="the file SHARDGYM_RANK_REPORTS named")
    ap.add_argument("--skip", type=int, default=8,
                    help="iterations left out at the start of each plan (warm-up; default 8)")
    ap.add_argument("--width", type=int, default=48, help="characters of the plan shown")
    a = ap.parse_args()
    try:
        lines = [json.loads(l) for l in open(a.reports) if l.strip()]
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"rank_decomposition.py: {a.reports}: {e}")
    rows = []
    for plan, its in runs_of(lines):
        its = its[a.skip:]
        its = [d for d in its if d["ranks"] and all(r["blocks"] for r in d["ranks"])]
        if not its:
            continue
        steps = [max(r["step_s"] for r in d["ranks"]) for d in its]
        outside = {c: statistics.median(s - accounted(d["ranks"], c) for s, d in zip(steps, its))
                   for c in CHOICES}
        skew = statistics.median(max(r["step_s"] for r in d["ranks"]) -
                                 min(r["step_s"] for r in d["ranks"]) for d in its)
        rows.append((plan, statistics.median(steps), outside, skew, len(its)))
    if not rows:
        sys.exit(f"rank_decomposition.py: no plan with more than {a.skip} iterations in "
                 f"{a.reports}")
    w = a.width
    print(f"time outside the blocks and the optimizer step, ms (median over each plan's "
          f"iterations after the first {a.skip})")
    print(f"{'plan':{w}s} {'step':>7s} " + " ".join(f"{c:>17s}" for c in CHOICES) +
          f" {'rank skew':>9s} {'iters':>5s}")
    for plan, step, out, skew, n in rows:
        print(f"{plan[:w]:{w}s} {step * 1e3:7.2f} " +
              " ".join(f"{out[c] * 1e3:17.2f}" for c in CHOICES) + f" {skew * 1e3:9.2f} {n:5d}")
    print(f"over {len(rows)} plans:")
    for c in CHOICES:
        v = [r[2][c] * 1e3 for r in rows]
        q = statistics.quantiles(v, n=10) if len(v) > 1 else v * 9
        print(f"  {c:17s} median {statistics.median(v):5.2f} ms, 10th to 90th percentile "
              f"{q[0]:5.2f} to {q[-1]:5.2f} ms (range {q[-1] - q[0]:4.2f}), "
              f"standard deviation {statistics.pstdev(v):4.2f} ms")


if __name__ == "__main__":
    main()
