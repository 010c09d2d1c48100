#!/usr/bin/env bash
# Configures and builds everything into build/. Overrides: SHARDGYM_BUILD_DIR (build folder),
# SHARDGYM_BUILD_TYPE (default Release), SHARDGYM_JOBS (default: all cores); extra arguments
# go to cmake (e.g. -DSHARDGYM_WITH_TORCH=OFF). With .venv (scripts/setup.sh) the Python
# extension is built too, against .venv's python (-DSHARDGYM_PYTHON=OFF to leave it out).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${SHARDGYM_BUILD_DIR:-build}
jobs=${SHARDGYM_JOBS:-$(nproc)}
build_type=${SHARDGYM_BUILD_TYPE:-Release}
python_args=()
if [[ -x .venv/bin/python ]]; then
  python_args=(-DSHARDGYM_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python")
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${python_args[@]}" "$@"
ninja -C "$build_dir" -j"$jobs"
