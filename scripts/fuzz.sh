#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang, ASan + UBSan, LibTorch off) into build-fuzz/,
# replays the saved corpus fuzz/corpus/<harness>/ through each, then fuzzes each harness in
# turn (one at a time: the machine has 2 cores). New inputs go to build-fuzz/corpus/<harness>/
# (the saved corpus stays as committed unless --minimize), findings to
# build-fuzz/artifacts/<harness>/, libFuzzer's output to build-fuzz/logs/<harness>.log.
# Fails on the first finding (crash, sanitizer report, uncaught exception, timeout, OOM).
# See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_harnesses=(strategy_fuzz plan_fuzz config_fuzz trace_wire_fuzz trace_file_fuzz
  agent_checkpoint_fuzz ppo_checkpoint_fuzz published_table_fuzz calibration_fuzz)

usage() {
  cat <<USAGE
Usage: scripts/fuzz.sh [options] [harness ...]     (default: ${all_harnesses[*]})
  --seconds S     fuzz each harness for S seconds (default 60)
  --runs N        fuzz each harness for N executions instead
  --replay-only   only replay the saved corpus (the regression check)
  --minimize      afterwards, merge the new inputs into fuzz/corpus/<harness>/ and minimize
                  it (libFuzzer -merge=1; files named regress-* are always kept)
  --no-build      use the harnesses already in the build folder
  -h, --help      this text
Environment: SHARDGYM_FUZZ_BUILD_DIR (default build-fuzz), SHARDGYM_JOBS (default 2),
  FUZZ_FLAGS (extra libFuzzer flags, e.g. "-jobs=1 -use_value_profile=1").
Limits on every run: -rss_limit_mb=2048 -timeout=10 (seconds per input).
USAGE
}

seconds=60 runs="" replay_only=0 minimize=0 build=1 harnesses=()
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --replay-only) replay_only=1; shift ;;
    --minimize) minimize=1; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
((${#harnesses[@]})) || harnesses=("${all_harnesses[@]}")

build_dir=${SHARDGYM_FUZZ_BUILD_DIR:-build-fuzz}
if ((build)); then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSHARDGYM_FUZZ=ON \
    -DSHARDGYM_WITH_TORCH=OFF -DSHARDGYM_BUILD_TESTS=OFF >/dev/null
  ninja -C "$build_dir" -j"${SHARDGYM_JOBS:-2}" "${harnesses[@]}"
fi

limits=(-rss_limit_mb=2048 -timeout=10)
# Leaks are findings too; halt_on_error makes every ASan/UBSan report fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mkdir -p "$build_dir/logs"
for h in "${harnesses[@]}"; do
  bin=$build_dir/fuzz/$h
  seeds=fuzz/corpus/$h
  work=$build_dir/corpus/$h
  artifacts=$build_dir/artifacts/$h/
  log=$build_dir/logs/$h.log
  mkdir -p "$seeds" "$work" "$artifacts"
  dict=()
  [[ -f fuzz/$h.dict ]] && dict=(-dict="fuzz/$h.dict")

  echo "== $h: replaying $(find "$seeds" -type f | wc -l) saved inputs"
  "$bin" "${limits[@]}" -artifact_prefix="$artifacts" -runs=0 "$seeds" >"$log.replay" 2>&1 ||
    { tail -n 40 "$log.replay"; echo "fuzz.sh: $h fails on its saved corpus" >&2; exit 1; }
  ((replay_only)) && continue

  budget=(-max_total_time="$seconds")
  [[ -n "$runs" ]] && budget=(-runs="$runs")
  echo "== $h: fuzzing (${budget[*]})"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
  if ! "$bin" "${limits[@]}" "${dict[@]}" "${budget[@]}" -print_final_stats=1 \
      -artifact_prefix="$artifacts" ${FUZZ_FLAGS:-} "$work" "$seeds" >"$log" 2>&1; then
    tail -n 60 "$log"
    # A harness may run with symbolize=0 (trace_file_fuzz does, for speed): replay the newest
    # finding once with symbolization for a readable stack.
    last=$(ls -t "$artifacts" 2>/dev/null | head -n 1)
    if [[ -n "$last" ]]; then
      echo "== $h: replaying $artifacts$last with symbolize=1 (stack in $log.symbolized)"
      ASAN_OPTIONS=$ASAN_OPTIONS:symbolize=1 "$bin" "${limits[@]}" "$artifacts$last" \
        >"$log.symbolized" 2>&1 || true
    fi
    echo "fuzz.sh: $h found something; the input is in $artifacts" >&2
    exit 1
  fi
  wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e - s}')
  grep -E '^#[0-9]+.*(DONE|cov:)' "$log" | tail -n 1
  grep -E 'stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" | tr '\n' ' '
  echo
  # trace_file_fuzz's own tally: the reading child's contained failures (HDF5's), by kind.
  grep -A12 '^trace_file_fuzz: [0-9]* inputs' "$log" | grep -E '^(trace_file_fuzz:|  )' || true
  echo "wall ${wall}s"

  if ((minimize)); then
    fresh=$build_dir/corpus/$h.min
    rm -rf "$fresh" && mkdir -p "$fresh"
    "$bin" "${limits[@]}" -merge=1 "$fresh" "$seeds" "$work" >"$log.merge" 2>&1
    find "$seeds" -type f ! -name 'regress-*' -delete
    cp "$fresh"/* "$seeds"/ 2>/dev/null || true
    echo "== $h: corpus minimized to $(find "$seeds" -type f | wc -l) files, $(du -sh "$seeds" | cut -f1)"
  fi
done
