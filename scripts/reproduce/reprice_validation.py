#!/usr/bin/env python3
"""Re-prices the plans of a recorded `validate-sim` run with this build's simulator and the run's
own calibration file, against the live step times the run recorded: how a change to the
simulator moves its error on live measurements, without measuring again (docs/simulator-
fidelity.md). The calibration is not refitted; with --kernel-us the file's per-kernel time is
replaced, to see how much the plans' order depends on it.

Usage: python3 scripts/reproduce/reprice_validation.py VALIDATE.json CALIB.yaml CONFIG.yaml
           [--kernel-us X] [--bin build/experiments/shardgym]
CONFIG: the simulator config of the run (experiments/fidelity/sim-threads-4.yaml; its world
is set to the calibration's ranks). Prints the median |sim / live - 1|, Kendall tau of the
plans' step times, the median error per micro-batch count, and the peak memory's median
error.
"""
import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("validation")
    ap.add_argument("calibration")
    ap.add_argument("config")
    ap.add_argument("--kernel-us", type=float, help="replace the calibration's kernel_s")
    ap.add_argument("--bin", default="build/experiments/shardgym")
    a = ap.parse_args()
    run = json.load(open(a.validation))
    calib = open(a.calibration).read()
    ranks = re.search(r"ranks: (\d+)", calib)
    if not ranks:
        sys.exit("reprice_validation: no 'ranks:' in " + a.calibration)
    if a.kernel_us is not None:
        calib = re.sub(r"kernel_s: [0-9.eE+-]+", f"kernel_s: {a.kernel_us * 1e-6}", calib)
    tmp = tempfile.mkdtemp()
    calib_path = os.path.join(tmp, "calib.yaml")
    open(calib_path, "w").write(calib)
    config = open(a.config).read()
    config = re.sub(r"gpus: \d+", "gpus: " + ranks.group(1), config)
    config = re.sub(r"world_size: \d+", "world_size: " + ranks.group(1), config)
    config = re.sub(r"(?m)^  calibration: .*$", "  calibration: " + calib_path, config)
    config_path = os.path.join(tmp, "sim.yaml")
    open(config_path, "w").write(config)

    pairs, by_m, memory = [], {}, []
    for p in run["plans"]:
        out = subprocess.run([a.bin, "cost", config_path, "--plan", p["plan"], "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"reprice_validation: {p['plan']}: {out.stderr.strip()}")
        priced = json.loads(out.stdout)
        sim = priced["step_latency_s"]
        pairs.append((sim, p["live_step_s"]))
        peak = priced["peak_memory_bytes"]
        peak = max(peak) if isinstance(peak, list) else peak
        if p.get("live_peak_bytes"):
            memory.append(abs(peak / p["live_peak_bytes"] - 1))
        m = re.search(r"[(,]m=(\d+)", p["plan"])
        by_m.setdefault(int(m.group(1)) if m else 1, []).append(sim / p["live_step_s"] - 1)
    conc = disc = 0
    for (s1, l1), (s2, l2) in itertools.combinations(pairs, 2):
        v = (s1 - s2) * (l1 - l2)
        conc += v > 0
        disc += v < 0
    err = statistics.median(abs(s / l - 1) for s, l in pairs)
    print(f"{len(pairs)} plans: step median |sim / live - 1| {100 * err:.1f} %, "
          f"Kendall tau {(conc - disc) / max(1, conc + disc):.3f}; by m: " +
          ", ".join(f"m={m} {100 * statistics.median(v):+.1f} %" for m, v in sorted(by_m.items())) +
          (f"; peak memory median |sim / live - 1| {100 * statistics.median(memory):.1f} %"
           if memory else ""))


if __name__ == "__main__":
    main()
