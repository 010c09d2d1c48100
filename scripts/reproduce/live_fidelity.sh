#!/usr/bin/env bash
# The simulator against this machine's live runtime (docs/live-fidelity.md, "Against the
# live runtime"): for each case of experiments/fidelity/ (2 and 4 ranks, threads and
# processes), `shardgym calibrate` fits the simulator on one plan per catalog strategy, then
# `shardgym validate-sim` compares it with the live run on random plans it was not fitted on.
#   scripts/reproduce/live_fidelity.sh [--plans N] [--iterations N] [--warmup N] [--pipelines] [--out DIR]
#                            [CASE...]
# CASE is threads-2, threads-4, processes-2 or processes-4 (default: all four). Writes
# DIR/calib-CASE.yaml, DIR/validate-CASE.json, DIR/validate-CASE.txt and the traces of both
# runs, DIR/validate-CASE.live.h5 and .sim.h5 (`shardgym report DIR` plots them; DIR:
# runs/fidelity). --pipelines: random pipelined plans instead (validate-sim --pipelines, no
# traces), into DIR/validate-pp-CASE.json and .txt.
# Run it on an otherwise idle machine: other load shows up as measurement noise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

plans=30 iterations=5 warmup=2 out=runs/fidelity pipelines=0
cases=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --plans) plans=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --pipelines) pipelines=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    threads-2|threads-4|processes-2|processes-4) cases+=("$1"); shift ;;
    *) echo "live_fidelity.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ ${#cases[@]} -gt 0 ]] || cases=(threads-2 threads-4 processes-2 processes-4)
bin=${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym
[[ -x $bin ]] || { echo "live_fidelity.sh: $bin not built (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in "${cases[@]}"; do
  config=experiments/fidelity/live-$c.yaml
  echo "== $c: calibrate"
  "$bin" calibrate "$config" --out "$out/calib-$c.yaml" --warmup "$warmup" \
    --iterations "$iterations"
  if [[ $pipelines == 1 ]]; then
    echo "== $c: validate on $plans random pipelined plans"
    "$bin" validate-sim "$config" --calibration "$out/calib-$c.yaml" --plans "$plans" \
      --warmup "$warmup" --iterations "$iterations" --seed 1 --pipelines \
      --out "$out/validate-pp-$c.json" | tee "$out/validate-pp-$c.txt"
    continue
  fi
  echo "== $c: validate on $plans random plans"
  "$bin" validate-sim "$config" --calibration "$out/calib-$c.yaml" --plans "$plans" \
    --warmup "$warmup" --iterations "$iterations" --seed 1 --out "$out/validate-$c.json" \
    --traces "$out/validate-$c" \
    | tee "$out/validate-$c.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
