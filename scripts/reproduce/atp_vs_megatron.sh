#!/usr/bin/env bash
# ATP's qualitative result on the simulator: for each single/multi-node scenario, the
# throughput of Megatron 1D (the static plan) against every uniform 2D mesh of the same
# degree and of any degree, from `shardgym cost` (noise-free, step 0 of the scenario).
# Usage: scripts/reproduce/atp_vs_megatron.sh [scenario ...]   (default: pcie-1node nvswitch-1node ib-4node)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin=${SHARDGYM_BIN:-${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym}
scenarios=("$@")
((${#scenarios[@]})) || scenarios=(pcie-1node nvswitch-1node ib-4node)
throughput() { "$bin" cost "$1" --plan "$2" 2>/dev/null | awk '/^throughput/{print $2}'; }
printf '%-16s %-12s %-44s %14s %8s\n' scenario megatron "best 2D mesh (same degree | any degree)" "tokens/s" ratio
for name in "${scenarios[@]}"; do
  cfg=experiments/scenarios/$name.yaml
  mega_plan=$("$bin" cost "$cfg" --plan megatron | awk '/^plan/{print $2}')
  mega=$(throughput "$cfg" megatron)
  t=$(sed -E 's/.*t=([0-9]+).*/\1/' <<<"$mega_plan")
  best_same=0 plan_same="" best_any=0 plan_any=""
  for d1 in 2 4 8 16; do
    for d2 in 2 4 8 16; do
      for first in row col; do
        plan="uniform:tp2d(d1=$d1,d2=$d2,first=$first)"
        v=$(throughput "$cfg" "$plan") || true
        [[ -z "$v" ]] && continue
        if awk "BEGIN{exit !($v > $best_any)}"; then best_any=$v plan_any=$plan; fi
        if ((d1 * d2 == t)) && awk "BEGIN{exit !($v > $best_same)}"; then best_same=$v plan_same=$plan; fi
      done
    done
  done
  printf '%-16s %-12s %-44s %14s %8s\n' "$name" "$mega_plan" "(Megatron)" "$mega" "1.000"
  [[ -n "$plan_same" ]] && printf '%-16s %-12s %-44s %14s %8.3f\n' "" "" "$plan_same" "$best_same" "$(awk "BEGIN{print $best_same/$mega}")"
  printf '%-16s %-12s %-44s %14s %8.3f\n' "" "" "$plan_any" "$best_any" "$(awk "BEGIN{print $best_any/$mega}")"
done
