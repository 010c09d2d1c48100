#!/usr/bin/env bash
# Installs the Debian 12 packages ShardGym builds and tests with, then the Python packages of
# python/requirements*.txt into .venv (the `shardgym` package, its tests and examples; see
# those files for why each one). Skips apt entirely when every package is already installed
# and pip when .venv already has the pinned versions, so it is fast and works offline after
# the first run.
# clang and libclang-rt-14-dev: the libFuzzer build of scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  cmake ninja-build g++ pkg-config clang libclang-rt-14-dev
  libtorch-dev libgloo-dev libhdf5-dev libcli11-dev libyaml-cpp-dev libgtest-dev
  python3-h5py python3-torch python3-matplotlib python3-numpy
  python3-dev python3-venv  # the extension's headers; .venv below
  chromium  # headless: python/tests/test_report.py renders the report page and checks its images
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages installed"
else
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "setup: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python: a venv over Debian's python3 that sees its packages (numpy, h5py, torch), plus the
# pinned PyPI packages. A stamp of the requirement files skips pip when nothing changed.
venv=.venv
reqs=(python/requirements.txt python/requirements-nodeps.txt)
[[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv --system-site-packages "$venv"
stamp=$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$venv/.requirements-stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "setup: $venv has the pinned Python packages"
else
  echo "setup: installing the Python packages of ${reqs[*]} into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r python/requirements.txt
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    -r python/requirements-nodeps.txt
  echo "$stamp" > "$venv/.requirements-stamp"
fi
# The oldest Gymnasium the package allows (pyproject.toml: gymnasium>=1.1), apart from the
# venv's: ctest's python_gymnasium_oldest runs the env and vector tests with it first on
# PYTHONPATH (gymnasium itself only; its dependencies are the venv's).
oldest=$venv/gymnasium-oldest
if [[ ! -d $oldest/gymnasium-1.1.1.dist-info ]]; then
  echo "setup: installing gymnasium 1.1.1 into $oldest"
  rm -rf "$oldest"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$oldest" \
    gymnasium==1.1.1
fi
