#include "runtime/live/device.h"

#include <cstdlib>

#ifdef SHARDGYM_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace shardgym::live {

bool built_with_cuda() {
#ifdef SHARDGYM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef SHARDGYM_WITH_CUDA
  return static_cast<int>(c10::cuda::device_count());
#else
  return 0;
#endif
}

std::string why_device_unusable(const std::string& device, const std::string& backend, int ranks) {
  if (device == "cpu") {
    if (backend == "nccl") return "backend nccl needs device cuda";
    return "";
  }
  if (device != "cuda") return "device '" + device + "': expected cpu or cuda";
  if (!built_with_cuda())
    return "device cuda needs a CUDA build of ShardGym (scripts/build_cuda.sh); this one is "
           "CPU-only";
  const int n = cuda_device_count();
  if (n == 0) return "device cuda: no CUDA device is visible";
  if (backend == "nccl" && ranks > n)
    return "backend nccl runs one rank per GPU, and " + std::to_string(ranks) +
           " ranks need " + std::to_string(ranks) + " GPUs but " + std::to_string(n) +
           " are visible (NCCL refuses two ranks on one GPU; backend gloo can share one)";
  return "";
}

int local_cuda_index(int rank) {
  const int n = cuda_device_count();
  if (n <= 0) return 0;
  int local = rank;
  if (const char* v = std::getenv("LOCAL_RANK")) local = std::atoi(v);
  return local % n;
}

void synchronize(const c10::Device& device) {
#ifdef SHARDGYM_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDAGuard guard(device);
    c10::cuda::device_synchronize();
  }
#else
  (void)device;
#endif
}

int64_t cuda_peak_allocated_bytes(int index) {
#ifdef SHARDGYM_WITH_CUDA
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  return stats.allocated_bytes[0].peak;  // [0]: StatType AGGREGATE (all pools)
#else
  (void)index;
  return 0;
#endif
}

void cuda_reset_peak(int index) {
#ifdef SHARDGYM_WITH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(index);
#else
  (void)index;
#endif
}

}  // namespace shardgym::live
