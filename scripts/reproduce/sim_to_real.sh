#!/usr/bin/env bash
# Sim-to-real (docs/live-fidelity.md, "Sim-to-real"): PPO trained only on the calibrated
# simulator of the live cluster, then evaluated on the live run with the simulator's predicted
# gain over Megatron-LM beside the measured one.
#   scripts/reproduce/sim_to_real.sh [--seeds "0 1 2"] [--eval-seeds 0,1,2,3,4,5] [--steps N] [--out DIR]
#                          [--eval-iterations K] [--agent ID] [--calibration F]
#                          [--case uniform|pipeline]
# First calibrates the simulator on the live run as it is now (`shardgym calibrate
# experiments/fidelity/live-threads-4.yaml --passes 3 --warmup 8 --iterations 20` into
# DIR/calib.yaml: 8 warm-up iterations after each plan change, the eval's steady state, and
# windows of 20 iterations; every rank's figures go to DIR/rank-reports.jsonl, for
# scripts/reproduce/rank_decomposition.py; --calibration F uses F instead), then trains on
# experiments/fidelity/sim-threads-4.yaml with that calibration (DIR/sim.yaml) and evaluates
# on experiments/fidelity/live-threads-4.yaml (as DIR/live.yaml). Writes DIR/seedS/ (checkpoint and training
# trace) and DIR/eval-S.txt (DIR: runs/s2r); each policy is evaluated on every --eval-seeds
# seed for --steps steps (default 6 × 30), each step the median of K training iterations
# (live.iterations: K in DIR/live.yaml, default 5: one slow iteration of the host does not
# decide a step). Calibration and evaluation run under `chrt -f 10` when it is allowed (see
# docs/live-fidelity.md on scheduling). --case pipeline uses the pipeline pair instead
# (experiments/fidelity/live-pipeline-threads-4.yaml and sim-pipeline-threads-4.yaml: 2 stages
# of 2 ranks from Megatron-LM's pipelined plan; docs/live-pipelines.md, "Sim-to-real on a pipeline").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

seeds="0 1 2" eval_seeds=0,1,2,3,4,5 steps=30 out=runs/s2r agent="ppo(ent=0.03)" calibration=""
eval_iterations=5 case=uniform
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --eval-seeds) eval_seeds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --eval-iterations) eval_iterations=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --agent) agent=$2; shift 2 ;;
    --calibration) calibration=$2; shift 2 ;;
    --case) case=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sim_to_real.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
case $case in
  uniform) live_config=experiments/fidelity/live-threads-4.yaml
           sim_config=experiments/fidelity/sim-threads-4.yaml ;;
  pipeline) live_config=experiments/fidelity/live-pipeline-threads-4.yaml
            sim_config=experiments/fidelity/sim-pipeline-threads-4.yaml ;;
  *) echo "sim_to_real.sh: --case is uniform or pipeline, not '$case'" >&2; exit 2 ;;
esac
[[ $eval_iterations =~ ^[1-9][0-9]*$ ]] ||
  { echo "sim_to_real.sh: --eval-iterations must be a positive integer, not '$eval_iterations'" >&2; exit 2; }
bin=${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym
[[ -x $bin ]] || { echo "sim_to_real.sh: $bin not built (scripts/build.sh)" >&2; exit 1; }
rt=()
# At SCHED_FIFO a spinning thread is never preempted by its peers (docs/live-fidelity.md,
# "A hazard of chrt -f"): a bound on each live command ends such a run with an error.
if chrt -f 10 true 2>/dev/null; then rt=(timeout 900 chrt -f 10); fi
mkdir -p "$out"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); evaluation ${rt[*]:-without chrt}"
if [[ -z $calibration ]]; then
  calibration=$out/calib.yaml
  echo "== calibrate the simulator on the live run (3 passes, 8 warm-up and 20 measured iterations per plan)"
  rm -f "$out/rank-reports.jsonl"
  SHARDGYM_RANK_REPORTS=$out/rank-reports.jsonl "${rt[@]}" "$bin" calibrate \
    "$live_config" --out "$calibration" --passes 3 --warmup 8 \
    --iterations 20 > "$out/calibrate.log" 2>&1 || { tail -5 "$out/calibrate.log"; exit 1; }
fi
[[ -f $calibration ]] || { echo "sim_to_real.sh: no calibration file $calibration" >&2; exit 1; }
# The simulator config with this calibration (an absolute path: the copy lives in DIR).
sim=$out/sim.yaml
sed "s|^  calibration: .*|  calibration: $(realpath "$calibration")|" \
  "$sim_config" > "$sim"
grep -q "calibration: $(realpath "$calibration")" "$sim" ||
  { echo "sim_to_real.sh: could not set the calibration in $sim" >&2; exit 1; }
# The live config of the evaluation: each env step the median of K iterations.
live=$out/live.yaml
sed "s|^live:$|live:\n  iterations: $eval_iterations|" "$live_config" > "$live"
grep -q "^  iterations: $eval_iterations$" "$live" ||
  { echo "sim_to_real.sh: could not set live.iterations in $live" >&2; exit 1; }
for s in $seeds; do
  echo "== seed $s: train on the simulator"
  "$bin" train "$sim" --seed "$s" --out "$out/seed$s" \
    > "$out/train-$s.log" 2>&1
  echo "== seed $s: evaluate on the live run"
  "${rt[@]}" "$bin" eval "$live" --agent "$agent" \
    --checkpoint "$out/seed$s/agent.ckpt" --predicted-by "$sim" \
    --seeds "$eval_seeds" --steps "$steps" | tee "$out/eval-$s.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -H "gain over megatron" "$out"/eval-*.txt
