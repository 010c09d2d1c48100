#!/usr/bin/env python3
"""The calibrated simulator against calibrate's own uniform plans.

calibrate measures every uniform plan (one catalog strategy on every block) in each of its
passes and prints one progress line per plan ("[i/N] uniform:S: step X ms ..."). This script
takes the median of each plan's passes from that log, prices the same plan with
`shardgym cost SIMCONFIG --plan uniform:S --json`, and prints both with the relative error
(docs/live-fidelity.md, "Sim-to-real": where the predicted gains go wrong). Where the
calibration measured a drift reference (its lines end in "reference R ms"), each plan's step is
divided by the speed factor calibrate used (the mean of the references around it over their
median), so the live column is what the simulator was fitted to; the last line gives the
passes' median disagreement before and after that division.

    scripts/reproduce/uniform_plan_errors.py runs/s2r6/calibrate.log runs/s2r6/sim.yaml
"""
import argparse
import json
import re
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Example: scripts/reproduce/uniform_plan_errors.py "
                                        "runs/s2r6/calibrate.log runs/s2r6/sim.yaml")
    ap.add_argument("log", help="calibrate's output (its progress lines)")
    ap.add_argument("sim_config", help="a simulator config that uses that calibration")
    ap.add_argument("--bin", default="build/experiments/shardgym", help="the shardgym binary")
    a = ap.parse_args()
    try:
        text = open(a.log).read()
    except OSError as e:
        sys.exit(f"uniform_plan_errors.py: {e}")
    lines = re.findall(r"\[\d+/\d+\] (\S+): step ([\d.]+) ms[^\n]*?(?:reference ([\d.]+) ms)?$",
                       text, re.M)
    first = re.search(r"drift reference before the first plan: ([\d.]+) ms", text)
    factors = [1.0] * len(lines)
    if first and lines and lines[-1][2]:
        # A plan's factor: the references just before and just after it. Some mixed plans
        # have none after them (calibrate chains them in pairs); they share the next one.
        refs = [float(first.group(1))] + [float(r) for _, _, r in lines if r]
        typical = statistics.median(refs)
        k = 0  # index in refs of the reference before the current line
        for i, (_, _, r) in enumerate(lines):
            factors[i] = (refs[k] + refs[k + 1]) / 2 / typical
            if r:
                k += 1
    steps, raw = {}, {}
    for (plan, step, _), f in zip(lines, factors):
        if plan.startswith("uniform:"):
            steps.setdefault(plan, []).append(float(step) / f)
            raw.setdefault(plan, []).append(float(step))
    if not steps:
        sys.exit(f"uniform_plan_errors.py: no uniform plan's progress line in {a.log}")
    errors = []
    print(f"{'plan':52s} {'live ms':>8s} {'sim ms':>8s} {'error':>7s}  passes")
    for plan, live in steps.items():
        out = subprocess.run([a.bin, "cost", a.sim_config, "--plan", plan, "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"uniform_plan_errors.py: shardgym cost failed on {plan}: {out.stderr}")
        sim = json.loads(out.stdout)["step_latency_s"] * 1e3
        measured = statistics.median(live)
        errors.append(sim / measured - 1)
        print(f"{plan:52s} {measured:8.2f} {sim:8.2f} {100 * errors[-1]:+6.1f}%  "
              + " ".join(f"{x:.2f}" for x in live))
    print(f"{len(errors)} uniform plans: median |error| "
          f"{100 * statistics.median(abs(e) for e in errors):.1f} %, largest "
          f"{100 * max(abs(e) for e in errors):.1f} %")

    def disagreement(by_plan):
        d = [abs(x[k + 1] / x[k] - 1) for x in by_plan.values() for k in range(len(x) - 1)]
        return 100 * statistics.median(d) if d else float("nan")
    line = f"passes' median disagreement: {disagreement(raw):.1f} % as measured"
    if factors != [1.0] * len(lines):
        line += f", {disagreement(steps):.1f} % divided by the drift reference"
    print(line)


if __name__ == "__main__":
    main()
