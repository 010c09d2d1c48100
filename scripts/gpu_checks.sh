#!/usr/bin/env bash
# The checks that need a GPU, in one run (docs/gpu/README.md): the gpu-labelled tests (CUDA
# placement against the CPU reference for the GPT, Llama's blocks and pipelined plans; LiveRun
# on the GPU), the live step against PyTorch eager on the GPU, and a cuBLAS GEMM sweep. Logs
# and the sweep's CSV go to $OUT (default runs/gpu); a summary is printed last.
#
#   scripts/gpu_checks.sh                 build build-cuda (scripts/build_cuda.sh), then check
#   scripts/gpu_checks.sh --pack DIR      on a machine without a GPU: copy an existing
#                                         build-cuda's binaries and the shared libraries they
#                                         need (but LibTorch's and CUDA's) into DIR
#   scripts/gpu_checks.sh --prebuilt DIR  on the GPU machine: check with DIR's binaries and
#                                         the LibTorch of its python3 (same version required)
#
# A pack lets the build run where cores are cheap and the GPU time go to the checks alone. The
# binaries keep the absolute paths they were built with (the rank worker, the source folder):
# --prebuilt recreates them as links to this checkout when they are missing.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
bins=(tests/live/model/live_model_cuda_test tests/live/model/live_cuda_equivalence_worker
      tests/live/live_cuda_test runtime/live/shardgym_rank_worker experiments/shardgym)

if [[ ${1:-} == --pack ]]; then
  set -e
  dir=${2:?--pack DIR}
  rm -rf "$dir" && mkdir -p "$dir/build-cuda" "$dir/lib"
  for b in "${bins[@]}"; do
    # The checks that need a missing binary fail on the GPU machine; the others run.
    [[ -x build-cuda/$b ]] || { echo "gpu_checks: build-cuda/$b not built, left out" >&2; continue; }
    mkdir -p "$dir/build-cuda/$(dirname "$b")" && cp "build-cuda/$b" "$dir/build-cuda/$b"
    # Every resolved dependency outside LibTorch, CUDA and the C runtime.
    ldd "build-cuda/$b" | awk '$3 ~ /^\// {print $3}' |
      grep -Ev '/torch/lib/|/cuda|/nvidia/|/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
      xargs -r -I{} cp -nL {} "$dir/lib/"
  done
  grep -o 'Torch_DIR:PATH=.*' build-cuda/CMakeCache.txt | sed 's/^Torch_DIR:PATH=//' > "$dir/torch_dir"
  sed -n "s/^__version__ = '\(.*\)'/\1/p" "$(cat "$dir/torch_dir")/../../../version.py" > "$dir/torch_version"
  echo "$root" > "$dir/source_dir"
  du -sh "$dir"
  exit 0
fi

out=${OUT:-runs/gpu}
mkdir -p "$out" && : > "$out/summary.txt"
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/device.txt"
torch_version=$("$py" -c 'import torch; print(torch.__version__)')
echo "python3 torch $torch_version, cuda $("$py" -c 'import torch; print(torch.version.cuda)')" | tee -a "$out/device.txt"

if [[ ${1:-} == --prebuilt ]]; then
  pack=$(realpath "${2:?--prebuilt DIR}")
  if [[ $(cat "$pack/torch_version") != "$torch_version" ]]; then
    echo "gpu_checks: the pack was built against torch $(cat "$pack/torch_version"), python3 has $torch_version" >&2
    exit 1
  fi
  src=$(cat "$pack/source_dir")
  if [[ $src != "$root" && ! -e $src ]]; then mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; fi
  if [[ -e build-cuda/build.ninja ]]; then
    echo "gpu_checks: build-cuda holds a build of its own; move it away to check a pack" >&2
    exit 1
  fi
  rm -rf build-cuda && cp -a "$pack/build-cuda" build-cuda
  # The pack's libraries only where this machine lacks them.
  rm -rf /tmp/gpu-checks-lib && mkdir -p /tmp/gpu-checks-lib
  ldconfig -p > /tmp/gpu-checks-ldcache
  for l in "$pack"/lib/*; do
    grep -qF "$(basename "$l") (" /tmp/gpu-checks-ldcache || ln -sf "$l" /tmp/gpu-checks-lib/
  done
  echo "libraries from the pack: $(ls /tmp/gpu-checks-lib | tr '\n' ' ')" | tee -a "$out/device.txt"
  torch_lib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  # LibTorch's own libraries find CUDA's through their RPATH; the binaries need libcudart too.
  cuda_lib=$(dirname "$(dirname "$torch_lib")")/nvidia/cu13/lib
  export LD_LIBRARY_PATH=$torch_lib:$cuda_lib:/tmp/gpu-checks-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  for b in "${bins[@]}"; do
    [[ -x build-cuda/$b ]] || continue  # left out of the pack
    ldd "build-cuda/$b" | grep "not found" | sed "s|^|$b: |" | tee -a "$out/device.txt"
  done
else
  SHARDGYM_JOBS=${SHARDGYM_JOBS:-$(nproc)} scripts/build_cuda.sh -DSHARDGYM_PYTHON=OFF \
    > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
export SHARDGYM_SOURCE_DIR=$root

status=0
step() {  # step NAME SECONDS COMMAND...: runs it, its output to $out/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  [[ $rc == 0 ]] || status=1
}
# Which steps (GPU_CHECKS, default "tests bench gemm"); "fidelity" adds the simulator against
# live CPU ranks on pipelined plans, 2 and 4 ranks, threads and processes
# (scripts/reproduce/live_fidelity.sh --pipelines): the GPU machine's host is a quiet many-core machine;
# "memory" a step near the GPU's memory capacity (scripts/gpu_memory_pressure.py, Python only);
# "live-memory" the live ranks' memory count against the CUDA allocator (validate-sim);
# "stream" the step's memory-bound passes (scripts/gpu_stream_bench.py, Python only);
# "host" the host's issue time of an eager GPT layer (scripts/gpu_host_issue.py).
# Limits that keep the whole run inside a 10-minute lease command.
checks=" ${GPU_CHECKS:-tests bench gemm} "
if [[ $checks == *" tests "* ]]; then
  step cuda_equivalence 200 build-cuda/tests/live/model/live_model_cuda_test
  step live_cuda 150 build-cuda/tests/live/live_cuda_test
fi
if [[ $checks == *" bench "* ]]; then
  step bench_live 60 build-cuda/experiments/shardgym bench live --device cuda --python "$py" --iters 50
fi
if [[ $checks == *" gemm "* ]]; then
  step gemm_sweep 120 "$py" scripts/gpu_gemm_sweep.py --out "$out/gemm_sweep.csv"
fi
if [[ $checks == *" host "* ]]; then
  # The host's issue time of an eager GPT layer at small shapes (scripts/gpu_host_issue.py).
  step host_issue 120 "$py" scripts/gpu_host_issue.py --out "$out/host_issue.csv"
fi
if [[ $checks == *" stream "* ]]; then
  # The memory-bound passes (copy, AdamW, gradient clipping, zeroing) and the host's issue time
  # of a tiny kernel (scripts/gpu_stream_bench.py).
  step stream_bench 90 "$py" scripts/gpu_stream_bench.py --out "$out/stream_bench.csv"
fi
if [[ $checks == *" memory "* ]]; then
  # A step near the GPU's memory capacity (scripts/gpu_memory_pressure.py), with PyTorch's
  # default allocator and with expandable segments.
  # MEMORY_PRESSURE_ARGS: the script's options (default --quick).
  # shellcheck disable=SC2086
  step memory_pressure 240 "$py" scripts/gpu_memory_pressure.py ${MEMORY_PRESSURE_ARGS:---quick} \
    --out "$out/memory_pressure.csv"
  # shellcheck disable=SC2086
  step memory_pressure_expandable 240 env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    "$py" scripts/gpu_memory_pressure.py ${MEMORY_PRESSURE_ARGS:---quick} \
    --out "$out/memory_pressure_expandable.csv"
fi
if [[ $checks == *" live-memory "* ]]; then
  # The live memory count (runtime/core/live_memory.h) against the CUDA caching allocator's
  # peak on every rank: rank processes sharing the GPU over Gloo, pipelined plans and plans
  # of one stage (experiments/fidelity/live-cuda-processes-4.yaml; its step times are not the
  # point: Gloo stages collectives through the host).
  step workspace_probe 60 "$py" scripts/gpu_workspace_probe.py
  step live_memory_pipelined 200 build-cuda/experiments/shardgym validate-sim \
    experiments/fidelity/live-cuda-processes-4.yaml --pipelines --plans 12 --warmup 1 \
    --iterations 2 --seed 1 --no-repeat --allow-noisy --out "$out/live_memory_pipelined.json"
  step live_memory_one_stage 150 build-cuda/experiments/shardgym validate-sim \
    experiments/fidelity/live-cuda-processes-4.yaml --plans 8 --warmup 1 \
    --iterations 2 --seed 1 --no-repeat --allow-noisy --out "$out/live_memory_one_stage.json"
fi
if [[ $checks == *" fidelity "* ]]; then
  # LIVE_FIDELITY_CASES: some of threads-2 threads-4 processes-2 processes-4 (default: all).
  # shellcheck disable=SC2086
  step live_fidelity 420 env SHARDGYM_BUILD_DIR=build-cuda scripts/reproduce/live_fidelity.sh --pipelines \
    --out "$out/fidelity" ${LIVE_FIDELITY_CASES:-}
  tar czf "$out/live_fidelity.tgz" -C "$out" fidelity && rm -rf "$out/fidelity"
fi

echo "---- summary"
for f in cuda_equivalence live_cuda; do
  [[ -f $out/$f.log ]] || continue
  grep -hE '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|^\[       OK \]|max loss_err|max relative error' \
    "$out/$f.log" | sed 's/^/  /'
done
[[ -f $out/bench_live.log ]] && grep -A12 -iE 'step|eager' "$out/bench_live.log" | head -30
[[ -f $out/host_issue.csv ]] && sed 's/^/  /' "$out/host_issue.csv"
[[ -f $out/stream_bench.csv ]] && sed 's/^/  /' "$out/stream_bench.csv"
for f in memory_pressure memory_pressure_expandable; do
  [[ -f $out/$f.csv ]] && { echo "  $f:"; sed 's/^/    /' "$out/$f.csv"; }
done
[[ -f $out/workspace_probe.log ]] && sed 's/^/  /' "$out/workspace_probe.log"
for f in live_memory_pipelined live_memory_one_stage; do
  [[ -f $out/$f.log ]] && { echo "  $f:"; grep -E '^(peak memory|rank peaks|rank est\.|step) ' "$out/$f.log"; }
done
[[ -f $out/live_fidelity.log ]] && grep -E '^== |^step |^peak memory|^Kendall|^live noise|median error by micro-batch count|^step by micro-batch count|^device fit: the pipeline pass' "$out/live_fidelity.log"
cat "$out/summary.txt"
exit $status
