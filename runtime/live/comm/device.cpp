#include "runtime/live/comm/device.h"

#include <mutex>

#ifdef SHARDGYM_WITH_CUDA
#include <ATen/ATen.h>
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

std::string why_device_unusable(const std::string& device, const std::string& backend, int ranks,
                                bool threads) {
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
  if (threads && ranks > n)
    return std::to_string(ranks) + " rank threads cannot share " + std::to_string(n) +
           " GPU(s): LibTorch's autograd engine runs every backward of one GPU on one thread, so "
           "a rank waiting in a collective would block its peers; use launch: processes";
  return "";
}

int local_cuda_index(int local_rank) {
  const int n = cuda_device_count();
  return n <= 0 ? 0 : local_rank % n;
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

#ifdef SHARDGYM_WITH_CUDA
namespace {
// The caching allocator knows a device only after CUDA's lazy initialisation, which the first
// tensor on a CUDA device triggers; its statistics calls throw before that.
void ensure_cuda_initialised(int index) {
  static std::once_flag once;
  std::call_once(once, [index] {
    (void)at::empty({1}, at::TensorOptions().device(at::kCUDA, static_cast<c10::DeviceIndex>(index)));
  });
}
}  // namespace
#endif

int64_t cuda_peak_allocated_bytes(int index) {
#ifdef SHARDGYM_WITH_CUDA
  ensure_cuda_initialised(index);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  return stats.allocated_bytes[0].peak;  // [0]: StatType AGGREGATE (all pools)
#else
  (void)index;
  return 0;
#endif
}

int64_t cuda_allocated_bytes(int index) {
#ifdef SHARDGYM_WITH_CUDA
  ensure_cuda_initialised(index);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  return stats.allocated_bytes[0].current;
#else
  (void)index;
  return 0;
#endif
}

void cuda_reset_peak(int index) {
#ifdef SHARDGYM_WITH_CUDA
  ensure_cuda_initialised(index);
  c10::cuda::CUDACachingAllocator::resetPeakStats(index);
#else
  (void)index;
#endif
}

}  // namespace shardgym::live
