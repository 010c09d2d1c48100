#!/usr/bin/env bash
# The adaptivity suite's table (docs/suite.md, "Results on the adaptivity suite"; README, "On
# unseen instances"): for each task of experiments/suite.yaml, the references and `replan`,
# then ATP and PPO without its plan search, PPO with its rewards scaled (norm_reward=1), then
# PPO with its plan search (five training seeds each, trained on training instances only),
# each run to its own JSON under runs/suite/, then one table of them all (`suite --markdown
# --from-json`). CPU time, from the table's train and eval columns: about 45 min for the
# references and replan, 20 min for ATP and ppo(polish=0), 20 min for norm_reward, 1 h 40 min
# for ppo(polish=4) (node loss alone 30 min); JOBS=2 runs two tasks at a time.
# Usage: scripts/reproduce/adaptivity_suite.sh [TASK ...]   (default: all six)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin=${SHARDGYM_BIN:-${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym}
jobs=${JOBS:-1}
tasks=("$@")
((${#tasks[@]})) || tasks=(stragglers congestion mixed-hardware node-loss batch-ramp seq-warmup)
mkdir -p runs/suite
one_task() {
  local t=$1
  "$bin" suite experiments/suite.yaml --agents replan --tasks "$t" --out "runs/suite/R-$t.json" \
    > "runs/suite/R-$t.log" 2>&1
  "$bin" suite experiments/suite.yaml --agents "atp,ppo(polish=0)" --no-references --tasks "$t" \
    --out "runs/suite/L-$t.json" > "runs/suite/L-$t.log" 2>&1
  "$bin" suite experiments/suite.yaml --agents "ppo(polish=0,norm_reward=1)" --no-references \
    --tasks "$t" --out "runs/suite/N-$t.json" > "runs/suite/N-$t.log" 2>&1
  "$bin" suite experiments/suite.yaml --agents "ppo(polish=4)" --no-references --tasks "$t" \
    --out "runs/suite/P-$t.json" > "runs/suite/P-$t.log" 2>&1
  echo "$t done ($(date +%H:%M:%S))" >&2
}
running=0
for t in "${tasks[@]}"; do
  one_task "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait
files=()
for kind in R L N P; do
  for t in "${tasks[@]}"; do files+=("runs/suite/$kind-$t.json"); done
done
"$bin" suite --markdown --from-json "${files[@]}"
