#!/usr/bin/env bash
# Setup + build + the test suite. On a machine without a GPU the `gpu` tests report
# "skipped"; `cpu`, `multirank` and `python` (pytest over python/tests) tests must pass.
# Override the label regex with SHARDGYM_TEST_LABELS (e.g. SHARDGYM_TEST_LABELS=cpu).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/setup.sh
./scripts/build.sh
build_dir=${SHARDGYM_BUILD_DIR:-build}
labels=${SHARDGYM_TEST_LABELS:-cpu|multirank|gpu|python}
ctest --test-dir "$build_dir" --output-on-failure -j2 -L "$labels"
