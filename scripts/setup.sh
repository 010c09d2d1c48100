#!/usr/bin/env bash
# Installs the Debian 12 packages ShardGym builds and tests with. Skips apt entirely when
# every package is already installed, so it is fast and works offline after the first run.
# clang and libclang-rt-14-dev: the libFuzzer build of scripts/fuzz.sh.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config clang libclang-rt-14-dev
  libtorch-dev libgloo-dev libhdf5-dev libcli11-dev libyaml-cpp-dev libgtest-dev
  python3-h5py python3-torch python3-matplotlib python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages installed"
  exit 0
fi

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
