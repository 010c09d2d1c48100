#!/usr/bin/env bash
# Seed robustness of a learning agent (the bar "≥ 4 of 5 training seeds reach 95 % of the
# reference oracle's return within the stated budget"; docs/benchmarks.md, "PPO across
# training seeds"). For every CONFIG and training seed, one `shardgym bench learn` run that
# stops at the first greedy evaluation at or above THRESHOLD × the oracle's return or at the
# budget; its JSON goes to OUT/NAME-seedS.json, and a markdown table (one row per config) to
# stdout and OUT/summary.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

usage() {
  cat <<'EOF'
Usage: scripts/reproduce/seed_robustness.sh --agent ID --budget-s S [options] CONFIG ...

Runs `shardgym bench learn CONFIG --agent ID --budget-s S --threshold T --seed N` for every
CONFIG and every training seed, and prints per config: the wall time to the first evaluation
at or above the threshold (its fraction of the oracle's return) or "no" and the best
evaluation, per seed; how many seeds reached it; the restarts on stall per seed.

  --agent ID        learning agent (e.g. 'ppo(plan=alt,restart_s=40)'); required
  --budget-s S      wall-clock budget per run in seconds; required (the budget you state)
  --oracle O        reference: oracle (static) or dynamic-oracle (default: dynamic-oracle
                    where the config's scenario has events or a seq_mix, else oracle)
  --threshold T     fraction of the oracle's return (default 0.95)
  --seeds LIST      training seeds (default 0,1,2,3,4)
  --parallel P      runs at once, each pinned to its own core 0..P-1 (default 1; the budget
                    is wall clock, so never more runs than idle cores)
  --out DIR         where the JSON of every run goes (default runs/seeds)
  -h, --help        this text

Each run: OMP_NUM_THREADS=1, taskset to its core. Environment: SHARDGYM_BIN (default
build/experiments/shardgym).
EOF
}

bin=${SHARDGYM_BIN:-build/experiments/shardgym}
agent="" budget="" oracle="" threshold=0.95 seeds=0,1,2,3,4 parallel=1 out=runs/seeds
configs=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --agent) agent=${2:?--agent needs an id}; shift 2 ;;
    --budget-s) budget=${2:?--budget-s needs seconds}; shift 2 ;;
    --oracle) oracle=${2:?--oracle needs oracle or dynamic-oracle}; shift 2 ;;
    --threshold) threshold=${2:?--threshold needs a fraction}; shift 2 ;;
    --seeds) seeds=${2:?--seeds needs a list, e.g. 0,1,2,3,4}; shift 2 ;;
    --parallel) parallel=${2:?--parallel needs a count}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    -*) echo "seed_robustness.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[[ -n $agent && -n $budget ]] || { echo "seed_robustness.sh: --agent and --budget-s are required (see --help)" >&2; exit 2; }
((${#configs[@]})) || { echo "seed_robustness.sh: no CONFIG given (see --help)" >&2; exit 2; }
[[ -x $bin ]] || { echo "seed_robustness.sh: no shardgym at $bin (scripts/build.sh)" >&2; exit 2; }
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "seed_robustness.sh: --parallel must be a positive count" >&2; exit 2; }
cores=$(nproc)
((parallel <= cores)) || { echo "seed_robustness.sh: --parallel $parallel exceeds the $cores cores: the budget is wall clock" >&2; exit 2; }
for c in "${configs[@]}"; do [[ -f $c ]] || { echo "seed_robustness.sh: no config '$c'" >&2; exit 2; }; done
mkdir -p "$out"

jobs=()
for c in "${configs[@]}"; do
  for s in ${seeds//,/ }; do jobs+=("$c $s"); done
done

# Worker w runs jobs w, w+P, w+2P, ... pinned to core w.
worker() {
  local w=$1 i c s name o
  for ((i = w; i < ${#jobs[@]}; i += parallel)); do
    read -r c s <<<"${jobs[i]}"
    name=$(basename "$c" .yaml)
    o=$oracle
    if [[ -z $o ]]; then
      if grep -qE '^[[:space:]]*(events|seq_mix):' "$c"; then o=dynamic-oracle; else o=oracle; fi
    fi
    echo "[core $w] $name seed $s ($o, ${budget} s, load $(cut -d' ' -f1 /proc/loadavg))" >&2
    OMP_NUM_THREADS=1 taskset -c "$w" "$bin" bench learn "$c" --agent "$agent" --oracle "$o" \
      --threshold "$threshold" --budget-s "$budget" --seed "$s" --json \
      >"$out/$name-seed$s.json" 2>"$out/$name-seed$s.log" ||
      echo "[core $w] $name seed $s failed: see $out/$name-seed$s.log" >&2
  done
}
pids=()
for ((w = 0; w < parallel; ++w)); do worker "$w" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done

python3 - "$out" "$agent" "$budget" "$threshold" "$seeds" "${configs[@]}" <<'EOF' | tee "$out/summary.md"
import json, os, sys
out, agent, budget, threshold, seeds, *configs = sys.argv[1:]
seeds = [s for s in seeds.split(",") if s]
print(f"`{agent}`, budget {budget} s, threshold {threshold}\n")
print("| config | " + " | ".join(f"seed {s}" for s in seeds) + " | reached | restarts (per seed) |")
print("|---|" + "---|" * len(seeds) + "---|---|")
for c in configs:
    name = os.path.basename(c)[:-5] if c.endswith(".yaml") else os.path.basename(c)
    cells, restarts, reached = [], [], 0
    for s in seeds:
        try:
            d = json.load(open(f"{out}/{name}-seed{s}.json"))
        except (OSError, ValueError):
            cells.append("failed"); restarts.append("?"); continue
        frac = lambda r: r / d["oracle_return"] if d["oracle_return"] else float("nan")
        best = max((p["eval_return"] for p in d["points"]), default=float("nan"))
        if d["reached"]:
            reached += 1
            hit = next(p for p in d["points"] if p["eval_return"] >= d["threshold"] * d["oracle_return"])
            cells.append(f"{d['time_to_threshold_s']:.1f} s ({frac(hit['eval_return']):.3f})")
        else:
            cells.append(f"no, best {frac(best):.3f}")
        walls = d.get("restart_wall_s", [])
        restarts.append(f"{len(walls)}" + (f" ({', '.join(f'{w:.0f}' for w in walls)} s)" if walls else ""))
    print(f"| {name} | " + " | ".join(cells) + f" | {reached} of {len(seeds)} | " + "; ".join(restarts) + " |")
EOF
