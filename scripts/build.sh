#!/usr/bin/env bash
# Configures and builds everything into build/. Overrides: SHARDGYM_BUILD_DIR (build folder),
# SHARDGYM_BUILD_TYPE (default Release), SHARDGYM_JOBS (default: all cores); extra arguments
# go to cmake (e.g. -DSHARDGYM_WITH_TORCH=OFF). With .venv (scripts/setup.sh) the Python
# extension is built too, against .venv's python (-DSHARDGYM_PYTHON=OFF to leave it out).
# Where ccache is installed it is the compiler launcher (rebuilds in other checkouts and
# worktrees then reuse objects; set CCACHE_BASEDIR to the folder above the checkouts).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${SHARDGYM_BUILD_DIR:-build}
jobs=${SHARDGYM_JOBS:-$(nproc)}
build_type=${SHARDGYM_BUILD_TYPE:-Release}
python_args=()
if [[ -x .venv/bin/python ]]; then
  python_args=(-DSHARDGYM_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python")
fi
launcher_args=()
if command -v ccache >/dev/null; then
  launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${python_args[@]}" \
  "${launcher_args[@]}" "$@"
ninja -C "$build_dir" -j"$jobs"
