#!/usr/bin/env python3
"""Per-row view of `shardgym validate-sim --published experiments/validation/vtrain/ --json`.

Prints, for the rows matching the filters, predicted and measured iteration time and both per
layer and micro-batch on a stage (iteration / (m * layers / PP), the bubble not removed), the
figures docs/simulator-fidelity.md quotes for the single-node set. With --before, the rows whose
prediction moved between two such JSON files and by how much, grouped by (TP, micro-batch, PP).

  build/experiments/shardgym validate-sim --published experiments/validation/vtrain/ --json > now.json
  scripts/reproduce/vtrain_rows.py now.json tp=4 pp=1 h=1024 L=24
  scripts/reproduce/vtrain_rows.py now.json --before before.json

Filters: gpus, gb (global batch), mb, h, heads, L, tp, dp, pp (exact values).
"""
import argparse
import collections
import csv
import json
import os
import sys

COLS = {"gpus": 0, "gb": 1, "mb": 2, "h": 3, "heads": 4, "L": 5, "tp": 7, "dp": 8, "pp": 9}


def load(path):
    with open(path) as f:
        doc = json.load(f)
    table = doc["tables"][0]
    csv_path = table["csv"]
    if not os.path.isabs(csv_path):
        csv_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", csv_path)
    with open(csv_path) as f:
        rows = list(csv.reader(f))
    return table["runs"], rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="validate-sim --json output for the vtrain folder")
    ap.add_argument("filters", nargs="*", help="key=value, keys: " + ", ".join(COLS))
    ap.add_argument("--before", help="an older JSON of the same command: report what moved")
    args = ap.parse_args()
    want = {}
    for f in args.filters:
        key, _, value = f.partition("=")
        if key not in COLS or not value:
            sys.exit(f"bad filter '{f}': use key=value with key one of {', '.join(COLS)}")
        want[key] = value
    runs, rows = load(args.json)
    if args.before:
        old, _ = load(args.before)
        moved = collections.defaultdict(list)
        for a, b in zip(old, runs):
            if a["line"] != b["line"]:
                sys.exit("the two files list different rows")
            r = rows[b["line"] - 1]
            change = b["predicted_s"] / a["predicted_s"] - 1
            if abs(change) > 1e-9:
                moved[(r[7], r[2], r[9])].append(change)
        for (tp, mb, pp), ch in sorted(moved.items(), key=lambda kv: tuple(map(int, kv[0]))):
            print(f"TP {tp} micro-batch {mb} PP {pp}: {len(ch)} rows moved, "
                  f"largest {100 * max(ch, key=abs):+.3f} %")
        if not moved:
            print("no row moved")
        return
    for run in runs:
        r = rows[run["line"] - 1]
        if not all(r[COLS[k]] == v for k, v in want.items()):
            continue
        gb, mb, layers, dp, pp = (int(r[i]) for i in (1, 2, 5, 8, 9))
        m = gb // (mb * dp)
        per = lambda s: 1000 * s / (m * layers / pp)
        print(f"line {run['line']}: GPUs {r[0]} batch {gb} mb {mb} h {r[3]} L {layers} "
              f"TP {r[7]} DP {dp} PP {pp} (m={m}): predicted {1000 * run['predicted_s']:.1f} ms, "
              f"measured {1000 * run['measured_s']:.1f} ms ({run['predicted_s'] / run['measured_s']:.2f}); "
              f"per layer and micro-batch {per(run['predicted_s']):.2f} / {per(run['measured_s']):.2f} ms")


if __name__ == "__main__":
    main()
