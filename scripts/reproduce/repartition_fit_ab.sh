#!/usr/bin/env bash
# The repartition fit with and without the pipeline pass's boundary moves, on the same
# measurements (docs/calibration.md, "The repartition's terms"): each round calibrates once
# (the file as written fits the boundary moves too), writes a copy whose repartition terms are
# the fit without them (calibrate prints its terms: "a fit without them (not used)"), and
# validates both files on the same plans, with and without --pipelines. Then a table of the
# repartition time's median |sim / live − 1| per round and file.
#   scripts/reproduce/repartition_fit_ab.sh [--rounds N] [--config FILE] [--out DIR]
# Defaults: 6 rounds, experiments/fidelity/live-threads-2.yaml, runs/repartition-ab. About a
# minute and a half per round on 2 cores. Run it on an otherwise idle machine; each
# calibration's noise line (its agreement with itself) is in DIR/calib-A<round>.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

rounds=6 config=experiments/fidelity/live-threads-2.yaml out=runs/repartition-ab
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "repartition_fit_ab.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "--rounds must be a positive integer" >&2; exit 2; }
bin=${SHARDGYM_BIN:-build/experiments/shardgym}
[[ -x $bin ]] || { echo "no $bin: build first (scripts/build.sh)" >&2; exit 2; }
rt=()
chrt -f 10 true 2>/dev/null && rt=(chrt -f 10)
mkdir -p "$out"

for ((i = 1; i <= rounds; i++)); do
  echo "round $i/$rounds: calibrate" >&2
  "${rt[@]}" "$bin" calibrate "$config" --out "$out/calib-A$i.yaml" --allow-noisy > "$out/calib-A$i.log" 2>&1
  python3 - "$out" "$i" <<'PY'
import re, sys
out, i = sys.argv[1], sys.argv[2]
log = open(f"{out}/calib-A{i}.log").read()
m = re.search(r"a fit without them \(not used\): .*?\(([\d.e+-]+) ms \+ ([\d.e+-]+) ms per block \+ "
              r"([\d.e+-]+) ms per message \+ bytes / ([\d.e+-]+) GB/s\)", log)
if not m:
    sys.exit(f"calib-A{i}.log has no fit without the boundary moves (no pipeline pass?)")
fixed, block, message, gbs = (float(x) for x in m.groups())
line = ("repartition: {fixed_s: %.9g, per_block_s: %.9g, per_message_s: %.9g, bandwidth: %.9g, "
        "fit_error: 0}" % (fixed / 1e3, block / 1e3, message / 1e3, gbs * 1e9))
text = open(f"{out}/calib-A{i}.yaml").read()
text, n = re.subn(r"^repartition: \{.*\}$", line, text, flags=re.M)
if n != 1:
    sys.exit(f"calib-A{i}.yaml: no repartition line to replace")
open(f"{out}/calib-B{i}.yaml", "w").write(text)
PY
  for v in A B; do
    echo "round $i/$rounds: validate with file $v" >&2
    "${rt[@]}" "$bin" validate-sim "$config" --calibration "$out/calib-$v$i.yaml" --pipelines \
      --plans 30 --seed "$i" --no-repeat --allow-noisy --out "$out/pp-$v$i.json" > "$out/pp-$v$i.txt" 2>&1
    "${rt[@]}" "$bin" validate-sim "$config" --calibration "$out/calib-$v$i.yaml" \
      --plans 30 --seed "$i" --no-repeat --allow-noisy --out "$out/plain-$v$i.json" > "$out/plain-$v$i.txt" 2>&1
  done
done

python3 - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rep(path):
    return 100 * json.load(open(path))["repartition_s"]["median"]
rows = {k: [] for k in ("ppA", "ppB", "plainA", "plainB")}
print("round  pipelined: with moves / without   plain: with / without   calibration's agreement with itself")
for i in range(1, rounds + 1):
    noise = re.search(r"agreement with itself .*?: (median [\d.]+ %)", open(f"{out}/calib-A{i}.log").read())
    v = [rep(f"{out}/{k}-{x}{i}.json") for k, x in (("pp", "A"), ("pp", "B"), ("plain", "A"), ("plain", "B"))]
    for key, x in zip(rows, v):
        rows[key].append(x)
    print(f"{i:5d}  {v[0]:12.1f} / {v[1]:5.1f} %   {v[2]:12.1f} / {v[3]:5.1f} %   {noise.group(1) if noise else '?'}")
print("median %12.1f / %5.1f %%   %12.1f / %5.1f %%" % tuple(statistics.median(rows[k]) for k in rows))
PY
