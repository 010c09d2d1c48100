#!/usr/bin/env bash
# The "Uneven work and elastic worlds" table of docs/benchmarks.md: for each scenario, the
# adaptivity headroom (dynamic-oracle / hindsight-static throughput, from `shardgym compare`)
# with the plans of every rank's equal share (--data-shares 0 --uneven-heads 0), with uneven
# data shares and excluded groups (--data-shares N, N share groups: one per node), with uneven
# tensor-parallel shards (--uneven-heads 8: the catalog's light-position tp1d twins up to
# degree 8), and with both. Seeds: $SEEDS (default 0,1,2).
# Usage: scripts/reproduce/uneven_headroom.sh [CONFIG:N ...]   (default: the shipped dynamic scenarios)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin=${SHARDGYM_BIN:-${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym}
seeds=${SEEDS:-0,1,2}
heads=${HEADS:-8}
cases=("$@")
((${#cases[@]})) || cases=(
  experiments/scenarios/stragglers-come-go.yaml:4
  experiments/scenarios/periodic-congestion.yaml:4
  experiments/scenarios/hetero-pcie-nvswitch.yaml:2
  experiments/scenarios/hetero-dynamic.yaml:2
  experiments/scenarios/node-loss-return.yaml:4)
mkdir -p runs/uneven
echo "| scenario | share groups | even: hindsight / Megatron-LM | even: headroom | shares: hindsight | shares: headroom | heads: hindsight | heads: headroom | both: hindsight | both: headroom |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  cfg=${c%%:*} groups=${c##*:} name=$(basename "${c%%:*}" .yaml)
  row="| $name | $groups"
  for variant in "0 0" "$groups 0" "0 $heads" "$groups $heads"; do
    read -r n h <<<"$variant"
    log=runs/uneven/$name-shares$n-heads$h.txt
    "$bin" compare "$cfg" --agents megatron --seeds "$seeds" --data-shares "$n" \
      --uneven-heads "$h" >"$log" 2>/dev/null
    # The table's hindsight-static row (mean ratio to Megatron-LM) and the headroom line.
    hs=$(awk '$1 == "hindsight-static" {print $3; exit}' "$log")
    hr=$(sed -n 's/^adaptivity headroom.*: mean \([0-9.]*\), range \([0-9.-]*\);.*/\1 (\2)/p' "$log")
    row="$row | ${hs:-?} | ${hr:-?}"
  done
  echo "$row |"
done
