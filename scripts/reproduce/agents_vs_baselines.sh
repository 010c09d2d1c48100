#!/usr/bin/env bash
# The agents table of docs/benchmarks.md: for each scenario, train PPO with `shardgym bench
# learn` (keeping the best evaluated policy), then `shardgym compare` it with the static
# baselines, the search agents and the oracles over 5 seeds, traces under runs/agents/.
# (`dp` is left out: its 32 replicas do not divide ib-4node's batch, and compare stops at a
# static plan that is invalid; it runs out of memory on nvswitch-1node.)
# Takes about 5 minutes per scenario on 2 cores.
# Usage: scripts/reproduce/agents_vs_baselines.sh [config ...]
#        (default: quickstart and the five scenarios)   BUDGET_S=300 to change the budget,
#        THRESHOLD=0.99 the fraction of the reference oracle's return at which PPO stops
#        (the bar: PPO within 0.99 of the best plan).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin=${SHARDGYM_BIN:-${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym}
budget=${BUDGET_S:-300}
threshold=${THRESHOLD:-0.99}
configs=("$@")
((${#configs[@]})) || configs=(experiments/quickstart.yaml experiments/scenarios/{pcie-1node,nvswitch-1node,ib-4node,hetero-dynamic,hetero-pcie-nvswitch}.yaml)
mkdir -p runs/agents
for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .yaml)
  oracle=oracle
  grep -q "events:" "$cfg" && oracle=dynamic-oracle
  echo "== $name: bench learn (reference: $oracle, budget ${budget} s, threshold $threshold)"
  "$bin" bench learn "$cfg" --oracle "$oracle" --budget-s "$budget" --threshold "$threshold" \
    --save "runs/agents/$name-ppo.ckpt" 2>"runs/agents/$name-learn.log"
  echo "== $name: compare, seeds 0-4"
  # compare adds hindsight-static (the best static plan) and dynamic-oracle, and prints the
  # adaptivity headroom.
  "$bin" compare "$cfg" --agents ppo,megatron-sp,atp,random,greedy,anneal,oracle,phase-oracle \
    --checkpoint "ppo=runs/agents/$name-ppo.ckpt" --seeds 0,1,2,3,4 --markdown \
    --out "runs/agents/$name" 2>/dev/null
done
