#!/usr/bin/env bash
# GPU build (docs/design.md §7): LibTorch of the PyTorch wheel that `python3` imports (CUDA build),
# c10d's NCCL backend and the CUDA kernels, into build-cuda/. Needs nvcc (CUDACXX, or
# /usr/local/cuda/bin/nvcc) and the same packages as scripts/build.sh except libtorch-dev.
# Overrides as scripts/build.sh (SHARDGYM_BUILD_DIR, default build-cuda; SHARDGYM_JOBS;
# SHARDGYM_BUILD_TYPE); extra arguments go to cmake (e.g. -DCMAKE_CUDA_ARCHITECTURES=90).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

py=${PYTHON:-python3}
if ! torch_prefix=$("$py" -c 'import torch, torch.utils; assert torch.version.cuda, "CPU-only torch"; print(torch.utils.cmake_prefix_path)'); then
  echo "build_cuda.sh: '$py' has no CUDA build of PyTorch (set PYTHON to one that has)" >&2
  exit 1
fi
# NCCL's header: the CUDA toolkit's, else the nvidia-nccl wheel's next to torch.
nccl_inc=""
for d in "${NCCL_HOME:-/nonexistent}/include" /usr/local/cuda/include /usr/include \
    "$("$py" -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null)"; do
  if [ -f "$d/nccl.h" ]; then nccl_inc=$d; break; fi
done
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
export SHARDGYM_BUILD_DIR=${SHARDGYM_BUILD_DIR:-build-cuda}
exec scripts/build.sh -DSHARDGYM_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_PREFIX_PATH="$torch_prefix${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}" \
  ${nccl_inc:+-DNCCL_INCLUDE_DIR="$nccl_inc"} "$@"
