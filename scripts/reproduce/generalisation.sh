#!/usr/bin/env bash
# Generalisation of PPO to scenario variants it was not trained on (docs/benchmarks.md,
# "Generalisation to unseen variants"). For each dynamic scenario NAME:
#   1. train PPO on experiments/scenarios/NAME.yaml with the recipe of docs/benchmarks.md
#      (`shardgym bench learn`, reference dynamic-oracle, the best evaluated policy saved);
#   2. evaluate that checkpoint on the original and on every experiments/scenarios/variants/
#      NAME-*.yaml with `shardgym eval VARIANT --agent ckpt:PATH`, and the dynamic oracle and
#      hindsight-static on the same seeds;
#   3. print a markdown table per scenario: throughput x Megatron-LM (mean over the seeds, as
#      `eval` prints it), PPO / dynamic oracle and whether it is >= 0.9, the same on returns,
#      PPO over the better of the dynamic oracle and hindsight-static (the dynamic oracle picks
#      among each phase's optima, so with many short phases the best static plan can beat it),
#      and Megatron-LM / dynamic oracle (what never changing Megatron-LM's plan scores).
# Raw outputs under OUT/NAME/ (checkpoint, training log, one eval output per variant and agent);
# the tables also go to OUT/summary.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

usage() {
  cat <<'EOF'
Usage: scripts/reproduce/generalisation.sh [--out DIR] [--seeds LIST] [--train-seed N] [--eval-only]
                                 [--agent ID] [--budget-s S] [SCENARIO ...]

Trains PPO on each dynamic scenario (default: hetero-dynamic periodic-congestion
seq-mix-corpus stragglers-come-go) and evaluates the checkpoint on the original and on its
variants under experiments/scenarios/variants/SCENARIO-*.yaml, next to the dynamic oracle and
hindsight-static on the same seeds.

  --out DIR         where checkpoints, logs and eval outputs go (default runs/generalisation)
  --seeds LIST      evaluation seeds (default 0,1,2,3,4)
  --train-seed N    seed of PPO's training (default 0)
  --eval-only       reuse DIR/SCENARIO/ppo.ckpt instead of training
  --agent ID        train this agent instead of the config's (e.g. 'ppo(plan=alt,restart_s=40)')
  --budget-s S      training budget in seconds for every scenario, instead of the recipe's
  -h, --help        this text

Training recipe (docs/benchmarks.md), not tuned per variant:
  hetero-dynamic: bench learn --oracle dynamic-oracle --threshold 0.97 --budget-s 240
                  ("Agents on the scenario suite", BUDGET_S=240)
  the others:     bench learn --oracle dynamic-oracle --threshold 0.99 --budget-s 60
                  (90 s on seq-mix-corpus) ("Generalisation to unseen variants")
PPO / dynamic oracle is the ratio of the mean throughputs (repartition included); "met" means
>= 0.9. Also printed: the same ratio of returns, PPO over the better of the two oracles, and
Megatron-LM / dynamic oracle. About 12 minutes on 2 shared cores (training 7.5 of them).
Environment: SHARDGYM_BIN (default
build/experiments/shardgym).
EOF
}

bin=${SHARDGYM_BIN:-${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym}
out=runs/generalisation
seeds=0,1,2,3,4
train_seed=0
eval_only=0
agent=() budget_override=""
scenarios=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --seeds) seeds=${2:?--seeds needs a list, e.g. 0,1,2,3,4}; shift 2 ;;
    --train-seed) train_seed=${2:?--train-seed needs a number}; shift 2 ;;
    --eval-only) eval_only=1; shift ;;
    --agent) agent=(--agent "${2:?--agent needs an id}"); shift 2 ;;
    --budget-s) budget_override=${2:?--budget-s needs seconds}; shift 2 ;;
    -*) echo "generalisation.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
((${#scenarios[@]})) || scenarios=(hetero-dynamic periodic-congestion seq-mix-corpus stragglers-come-go)
[[ -x $bin ]] || { echo "generalisation.sh: no shardgym at $bin (scripts/build.sh)" >&2; exit 2; }
for name in "${scenarios[@]}"; do
  [[ -f experiments/scenarios/$name.yaml ]] ||
    { echo "generalisation.sh: no experiments/scenarios/$name.yaml" >&2; exit 2; }
  compgen -G "experiments/scenarios/variants/$name-*.yaml" >/dev/null ||
    { echo "generalisation.sh: no variants experiments/scenarios/variants/$name-*.yaml" >&2; exit 2; }
done

# Sums over the seed rows of an eval output: "return tokens/s x-megatron rows".
sums() {
  awk '$1 ~ /^[0-9]+$/ && NF == 10 { r += $3; t += $4; x += $5; n++ }
       END { if (!n) exit 1; printf "%.6f %.6f %.6f %d\n", r, t, x, n }' "$1"
}

mkdir -p "$out"
summary=$out/summary.md
: >"$summary"
for name in "${scenarios[@]}"; do
  dir=$out/$name
  mkdir -p "$dir"
  cfg=experiments/scenarios/$name.yaml
  ckpt=$dir/ppo.ckpt
  threshold=0.99 budget=60
  case $name in
    hetero-dynamic) threshold=0.97 budget=240 ;;
    seq-mix-corpus) budget=90 ;;
  esac
  [[ -n $budget_override ]] && budget=$budget_override
  if ((!eval_only)); then
    echo "== $name: bench learn ${agent[*]} (dynamic-oracle, threshold $threshold, ${budget} s, seed $train_seed)" >&2
    "$bin" bench learn "$cfg" "${agent[@]}" --oracle dynamic-oracle --threshold "$threshold" \
      --budget-s "$budget" --seed "$train_seed" --save "$ckpt" >"$dir/learn.txt" 2>"$dir/learn.log"
    grep -E "reached|not reached|best evaluation" "$dir/learn.txt" >&2 || true
  fi
  [[ -f $ckpt ]] || { echo "generalisation.sh: no checkpoint $ckpt" >&2; exit 1; }

  {
    echo "### $name (PPO trained on $name.yaml, seed $train_seed; eval seeds $seeds)"
    echo
    echo "| variant | PPO | dynamic oracle | hindsight-static | PPO / dynamic oracle | met >= 0.9? | PPO / dynamic oracle (return) | PPO / best of the two oracles | Megatron-LM / dynamic oracle |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } >>"$summary"
  for v in "$cfg" experiments/scenarios/variants/"$name"-*.yaml; do
    vname=$(basename "$v" .yaml)
    echo "== $name: eval on $vname" >&2
    if ((${#agent[@]})); then  # the trained agent's id, so that its checkpoint loads
      "$bin" eval "$v" "${agent[@]}" --checkpoint "$ckpt" --seeds "$seeds" >"$dir/$vname-ppo.txt" 2>/dev/null
    else
      "$bin" eval "$v" --agent "ckpt:$ckpt" --seeds "$seeds" >"$dir/$vname-ppo.txt" 2>/dev/null
    fi
    "$bin" eval "$v" --agent dynamic-oracle --seeds "$seeds" >"$dir/$vname-dynamic-oracle.txt" 2>/dev/null
    "$bin" eval "$v" --agent hindsight-static --seeds "$seeds" >"$dir/$vname-hindsight-static.txt" 2>/dev/null
    read -r pr pt px pn < <(sums "$dir/$vname-ppo.txt")
    read -r dr dt dx dn < <(sums "$dir/$vname-dynamic-oracle.txt")
    read -r hr ht hx hn < <(sums "$dir/$vname-hindsight-static.txt")
    awk -v v="$vname" -v pr="$pr" -v pt="$pt" -v px="$px" -v dr="$dr" -v dt="$dt" -v dx="$dx" \
        -v ht="$ht" -v hx="$hx" -v n="$pn" 'BEGIN {
      ratio = pt / dt
      best = dt > ht ? dt : ht
      printf "| %s | %.3f | %.3f | %.3f | %.3f | %s | %.3f | %.3f | %.3f |\n", v, px / n, dx / n,
             hx / n, ratio, (ratio >= 0.9 ? "yes" : "**no**"), pr / dr, pt / best, n / dx }' >>"$summary"
  done
  echo >>"$summary"
done
cat "$summary"
