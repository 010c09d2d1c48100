#!/usr/bin/env bash
# Adapting on live ranks (docs/benchmarks.md, "Uneven shares on live ranks"): the live
# straggler task (experiments/live-straggler.yaml: rank 1 at half speed for the middle half of
# the episode) measured on this machine's CPU ranks, next to the simulator's prediction of the
# same table.
#   scripts/reproduce/live_straggler.sh [--seeds N] [--out DIR]
# 1. `shardgym calibrate` on the task without its straggler (DIR/calib.yaml);
# 2. live: `shardgym eval` of even shares (dp), the best static uneven plan (dp@dp(w=2/1)) and
#    replan (planning on its simulator twin, calibrated), each against Megatron-LM in the same
#    call, seed by seed with the agents interleaved;
# 3. simulator: the same comparison on the calibrated simulator, with the hindsight-static and
#    dynamic-oracle references (the task's predicted headroom).
# Run it on an otherwise idle machine: the live figures come with their noise line.
# REUSE_CALIBRATION=1 keeps an existing DIR/calib.yaml.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seeds=5 out=runs/live-straggler
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "live_straggler.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "live_straggler.sh: --seeds takes a positive count" >&2; exit 2; }
bin=${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym
[[ -x $bin ]] || { echo "live_straggler.sh: $bin not built (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
task=experiments/live-straggler.yaml
calib=$(cd "$out" && pwd)/calib.yaml
agents='dp,static(plan=uniform:dp@dp(w=2/1)),replan'
seed_list=$(seq 0 $((seeds - 1)))

# The task without its straggler, for the calibration; the task with the calibration (live:
# replan's twin uses it) and on the simulator.
sed -e '/kind: straggler/d' -e 's/^  events:$/  events: []/' "$task" > "$out/quiet.yaml"
sed -e "s|^cluster:$|cluster:\n  calibration: $calib|" "$task" > "$out/live.yaml"
sed -e 's|^env: shardgym/TPLive-v0$|env: shardgym/TPSim-v0|' "$out/live.yaml" > "$out/sim.yaml"

[[ -f "$calib" && -n "${REUSE_CALIBRATION:-}" ]] || {
echo "== calibrate (the task without its straggler)"
"$bin" calibrate "$out/quiet.yaml" --out "$calib" | tail -n 3; }
echo "== live: each agent against Megatron-LM in the same call (eval), agents interleaved"
# The machine drifts by 5-10 % over minutes (docs/calibration.md): each eval runs Megatron-LM
# and the agent back to back on one seed, and the rounds alternate the agents, so that every
# ratio is taken within one window of the machine's time.
: > "$out/live.tsv"
IFS=, read -r -a agent_list <<< "$agents"
for s in $seed_list; do
  for a in "${agent_list[@]}"; do
    line=$("$bin" eval "$out/live.yaml" --agent "$a" --seeds "$s" --allow-noisy 2>&1) || {
      echo "$line" >&2; exit 1; }
    ratio=$(awk '$1 == "'"$s"'" && NF >= 5 {print $5}' <<< "$line")
    noise=$(grep -o 'median [0-9.]* %' <<< "$line" | head -n 1)
    printf '%s\t%s\t%s\t%s\n' "$a" "$s" "$ratio" "$noise" | tee -a "$out/live.tsv"
  done
done
python3 - "$out/live.tsv" <<'PY' | tee "$out/live.md"
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
agents = list(dict.fromkeys(r[0] for r in rows))
print("| agent | seeds | throughput x megatron, mean | min-max | live noise (median per call) |")
print("|---|---:|---:|---:|---|")
for a in agents:
    xs = [float(r[2]) for r in rows if r[0] == a]
    noise = [r[3] for r in rows if r[0] == a]
    print(f"| {a} | {len(xs)} | {statistics.mean(xs):.3f} | {min(xs):.3f}-{max(xs):.3f} | {', '.join(noise)} |")
PY
echo "== simulator (calibrated), with the references"
# shellcheck disable=SC2086
"$bin" compare "$out/sim.yaml" --agents "$agents" --seeds $seed_list --markdown | tee "$out/sim.md"
