#!/usr/bin/env bash
# Runs `shardgym train` on a small live config N times per failure mode and checks that every
# run ends with a named root cause, in time, with nothing left running. Results:
# docs/robustness.md. Run it niced on a shared machine:  nice -n 10 scripts/reproduce/live_faults.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

usage() {
  cat <<'EOF'
Usage: scripts/reproduce/live_faults.sh [--trials N] [--timeout S] [--grace G] [--modes "M ..."]

For each failure mode, runs build/experiments/shardgym train N times on
experiments/live-quickstart.yaml (4 ranks) with live.timeout_s = S and the mode's injected
fault, and checks each trial:
  - the command exits 1 (not 0, not a signal),
  - its output names the right rank and reason, before any other rank,
  - elapsed − baseline ≤ S + G, where baseline is the slowest of 3 fault-free runs up to
    the faulting step (process start, rank start, reset, one step, trace written),
  - nothing is left running: every process of a trial carries SHARDGYM_FAULT_TRIAL=<tag> in
    its environment (rank processes inherit it), and none may remain once the command exits.
Prints a table: mode, trials, passed (every check), cause first (exit 1 and the expected
cause named first, whatever the time), max elapsed, baseline, max elapsed − baseline,
timeout + grace.

Modes (fault at rank 1, second training step):
  throw        a rank thread throws                        (launch: threads, throw@1:1)
  stall        a rank thread stops taking part             (launch: threads, stall@1:1)
  nostart      a rank thread cannot be created             (launch: threads, nostart@1)
  stall-proc   a rank process stops taking part, is killed (launch: processes, stall@1:1)
  throw-proc   a rank process throws                       (launch: processes, throw@1:1)
  exit-proc    a rank process exits abruptly (status 3)    (launch: processes, exit@1:1)

Options:
  --trials N   trials per mode (default 100)
  --timeout S  live.timeout_s (default 3)
  --grace G    the stated grace in seconds (default 2: kEndGraceS in runtime/live/launch/thread_ranks.h,
               1 s for ranks to leave after the abort + 1 s to join threads or reap processes)
  --modes M    space-separated subset of the modes above (default: all)
  -h, --help   this text
Environment: SHARDGYM_BUILD_DIR (default build).
EOF
}

trials=100
timeout_s=3
grace_s=2
modes="throw stall nostart stall-proc throw-proc exit-proc"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --trials) trials=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --grace) grace_s=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "live_faults.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

build_dir=${SHARDGYM_BUILD_DIR:-build}
cli="$build_dir/experiments/shardgym"
[[ -x "$cli" ]] || { echo "live_faults.sh: no $cli; build first (scripts/build.sh)" >&2; exit 2; }
work=$(mktemp -d /tmp/shardgym_live_faults.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The quickstart with a static agent (dp), the given timeout, launch and fault.
make_config() {  # launch fault path
  sed -e "s/^  timeout_s: .*/  timeout_s: $timeout_s/" \
      -e "s/^  launch: .*/  launch: $1/" \
      -e "s/^  id: random/  id: dp/" \
      experiments/live-quickstart.yaml > "$3"
  if [[ -n "$2" ]]; then
    sed -i "s/^    clip: \"1.0\"/    clip: \"1.0\"\n    fault: \"$2\"/" "$3"
  fi
}

now() { date +%s.%N; }

# One run, its processes tagged through the environment; sets code, elapsed, out, stray.
trial_id=0
run_once() {  # config steps
  local start end tag
  trial_id=$((trial_id + 1))
  tag="$$-$trial_id"
  out="$work/out.txt"
  rm -rf "$work/run"
  start=$(now)
  set +e
  SHARDGYM_FAULT_TRIAL=$tag "$cli" train "$1" --out "$work/run" --steps "$2" >"$out" 2>&1 \
    </dev/null
  code=$?
  set -e
  end=$(now)
  elapsed=$(echo "$end - $start" | bc -l)
  stray=$(grep -lzs "^SHARDGYM_FAULT_TRIAL=$tag\$" /proc/[0-9]*/environ 2>/dev/null |
    cut -d/ -f3 | tr '\n' ' ' || true)
  stray=${stray% }
  if [[ -n "$stray" ]]; then kill -9 $stray 2>/dev/null || true; fi
}

declare -A launch fault cause
launch[throw]=threads;      fault[throw]="throw@1:1"
cause[throw]="rank 1 failed: step (command 3): injected fault (throw)"
launch[stall]=threads;      fault[stall]="stall@1:1"
cause[stall]="rank 1 stalled: no answer to step (command 3)"
launch[nostart]=threads;    fault[nostart]="nostart@1"
cause[nostart]="rank 1 failed: cannot start rank thread 1 of 4"
launch[stall-proc]=processes; fault[stall-proc]="stall@1:1"
cause[stall-proc]="rank 1 stalled: no answer to step (command 3)"
launch[throw-proc]=processes; fault[throw-proc]="throw@1:1"
cause[throw-proc]="rank 1 failed: step (command 3): injected fault (throw)"
launch[exit-proc]=processes; fault[exit-proc]="exit@1:1"
cause[exit-proc]="rank 1 died (exited with status 3) during step (command 3)"

rows=()
for mode in $modes; do
  [[ -n "${launch[$mode]:-}" ]] || { echo "live_faults.sh: unknown mode '$mode'" >&2; exit 2; }
  cfg="$work/$mode.yaml"
  # Baseline: fault-free, up to the faulting step (reset + step 0).
  make_config "${launch[$mode]}" "" "$work/base.yaml"
  baseline=0
  for _ in 1 2 3; do
    run_once "$work/base.yaml" 1
    [[ $code -eq 0 ]] || { echo "baseline run failed:"; cat "$out"; exit 1; }
    baseline=$(echo "if ($elapsed > $baseline) $elapsed else $baseline" | bc -l)
  done
  make_config "${launch[$mode]}" "${fault[$mode]}" "$cfg"
  limit=$(echo "$timeout_s + $grace_s" | bc -l)
  passed=0 named=0 max_elapsed=0 max_over=0
  for ((t = 1; t <= trials; t++)); do
    run_once "$cfg" 4
    over=$(echo "$elapsed - $baseline" | bc -l)
    why=""
    [[ $code -eq 1 ]] || why+=" exit $code;"
    grep -qF "${cause[$mode]}" "$out" || why+=" cause not named;"
    # ... and named first: the first "rank R <verb>" of the output is the expected one.
    first=$(grep -oE 'rank [0-9]+ (failed|stalled|died|blocked|was|answered|did)' "$out" | head -n 1)
    [[ "${cause[$mode]}" == "$first"* ]] || why+=" first named: '$first';"
    (( $(echo "$over <= $limit" | bc -l) )) || why+=" took ${elapsed}s;"
    [[ -z "$stray" ]] || why+=" left running: $stray;"
    # Named: exit 1 and the expected cause first, whatever the time.
    [[ $code -eq 1 && "$why" != *"cause not named"* && "$why" != *"first named"* ]] &&
      named=$((named + 1))
    if [[ -z "$why" ]]; then
      passed=$((passed + 1))
    else
      echo "$mode trial $t:$why" >&2
      tail -3 "$out" >&2
    fi
    max_elapsed=$(echo "if ($elapsed > $max_elapsed) $elapsed else $max_elapsed" | bc -l)
    max_over=$(echo "if ($over > $max_over) $over else $max_over" | bc -l)
  done
  rows+=("$(printf '| %-10s | %6d | %6d | %10d | %9.2f s | %9.2f s | %11.2f s | %9.2f s |' \
    "$mode" "$trials" "$passed" "$named" "$max_elapsed" "$baseline" "$max_over" "$limit")")
  echo "${rows[-1]}" >&2
done

echo "| mode       | trials | passed | cause first | max elapsed | baseline | max − baseline | timeout+grace |"
echo "|------------|--------|--------|-------------|-------------|----------|----------------|---------------|"
for r in "${rows[@]}"; do echo "$r"; done
