#!/usr/bin/env bash
# Sanitizer builds of the whole tree and their tests (docs/fuzzing.md, "Sanitizers").
#   scripts/sanitize.sh asan [cmake args]   ASan + UBSan into build-asan/, ctest -L cpu|multirank|gpu
#   scripts/sanitize.sh tsan [cmake args]   TSan into build-tsan/, ctest -L multirank, with the
#                                           suppressions of fuzz/tsan.supp (uninstrumented
#                                           Gloo / LibTorch only)
#   scripts/sanitize.sh tsan-sim [cmake args]  TSan into build-tsan-sim/: the tests that run
#                                           simulated envs and runs on threads (shared costs,
#                                           vector envs, the thread pool); no LibTorch needed
# e.g. scripts/sanitize.sh asan -DSHARDGYM_WITH_TORCH=OFF (what .ci/run does).
# Overrides: SHARDGYM_SANITIZE_BUILD_DIR (build folder), SHARDGYM_JOBS (default 2),
# SHARDGYM_TEST_LABELS (ctest -L), SHARDGYM_TEST_EXCLUDE (ctest -E regex),
# SHARDGYM_SANITIZE_TARGETS (ninja targets; default all for asan, the multirank tests for tsan,
# the threaded simulator tests for tsan-sim).
# Built -O1 -g: sanitizer reports with usable stacks, at about half the compile time of -O2.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kind=${1:-}
# tsan builds only what the multirank tests run (their executables and the rank workers).
multirank_targets="comm_test launch_test world_limits_test live_run_test memory_test bench_live_test
  process_test live_process_test
  live_model_mappings_test live_model_equivalence_test live_model_tp_block_test
  live_model_repartition_test live_comm_worker shardgym_rank_worker"
# tsan-sim builds and runs only the tests whose simulated runs share costs across threads.
threaded_sim_tests="sim_run_test sim_env_test env_vector_env_test env_thread_pool_test"
only=""
case "$kind" in
  asan) sanitize=address,undefined labels="cpu|multirank|gpu" targets="" ;;
  tsan) sanitize=thread labels="multirank" targets=$multirank_targets ;;
  tsan-sim)
    sanitize=thread labels="cpu" targets=$threaded_sim_tests
    only="^($(echo $threaded_sim_tests | tr ' ' '|'))\$" ;;
  -h|--help|"") sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; [[ -n "$kind" ]]; exit ;;
  *) echo "sanitize.sh: expected asan, tsan or tsan-sim, got '$kind'" >&2; exit 2 ;;
esac
shift
build_dir=${SHARDGYM_SANITIZE_BUILD_DIR:-build-$kind}
labels=${SHARDGYM_TEST_LABELS:-$labels}

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
  -DSHARDGYM_SANITIZE="$sanitize" "$@" >/dev/null
# shellcheck disable=SC2086  # a list of target names
ninja -C "$build_dir" -j"${SHARDGYM_JOBS:-2}" ${SHARDGYM_SANITIZE_TARGETS:-$targets}

# Every report fails its test: ASan/TSan exit with 66, UBSan aborts (-fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:exitcode=66:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$PWD/fuzz/tsan.supp}
chosen=()
[[ -n "${SHARDGYM_TEST_EXCLUDE:-}" ]] && chosen=(-E "$SHARDGYM_TEST_EXCLUDE")
[[ -n "$only" ]] && chosen+=(-R "$only")
ctest --test-dir "$build_dir" --output-on-failure -j2 -L "$labels" "${chosen[@]}"
