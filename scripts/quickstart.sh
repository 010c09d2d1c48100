#!/usr/bin/env bash
# Setup + build + one training run of experiments/quickstart.yaml (results in
# runs/quickstart/). Extra arguments go to `shardgym train`, e.g. --episodes 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/setup.sh
./scripts/build.sh
build_dir=${SHARDGYM_BUILD_DIR:-build}
"$build_dir/experiments/shardgym" train experiments/quickstart.yaml "$@"
