// CUDA versions of kernels/reshard_pack.h: one thread per element of the region.
#include <cuda_runtime.h>

#include "kernels/reshard_pack.h"

namespace shardgym::kernels {
namespace {

__global__ void pack_kernel(const float* src, int64_t cols, Region r, float* dst) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= r.size()) return;
  const int64_t i = k / r.cols(), j = k % r.cols();
  dst[k] = src[(r.r0 + i) * cols + r.c0 + j];
}

__global__ void unpack_kernel(const float* src, float* dst, int64_t cols, Region r) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= r.size()) return;
  const int64_t i = k / r.cols(), j = k % r.cols();
  dst[(r.r0 + i) * cols + r.c0 + j] = src[k];
}

constexpr int kThreads = 256;

}  // namespace

void pack_cuda(const float* src, int64_t rows, int64_t cols, const Region& r, float* dst, void* stream) {
  check_region(r, rows, cols);
  if (r.empty()) return;
  const int64_t blocks = (r.size() + kThreads - 1) / kThreads;
  pack_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, cols, r, dst);
}

void unpack_cuda(const float* src, float* dst, int64_t rows, int64_t cols, const Region& r, void* stream) {
  check_region(r, rows, cols);
  if (r.empty()) return;
  const int64_t blocks = (r.size() + kThreads - 1) / kThreads;
  unpack_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, dst, cols, r);
}

}  // namespace shardgym::kernels
