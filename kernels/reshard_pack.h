// Pack / unpack of rectangular shard regions, the inner loop of repartitioning.
//
// Moving a block to a new layout means each rank receives the sub-rectangles of a weight
// (and of its AdamW moments) that it lacks. Those regions are strided in the row-major
// source; collectives and point-to-point sends want them contiguous. `pack` copies region
// [r0, r1) × [c0, c1) of a row-major [rows, cols] matrix into a dense buffer, `unpack` writes
// a dense buffer back into a region. The CPU versions are the reference; with
// SHARDGYM_WITH_CUDA the same signatures exist for device pointers (reshard_pack.cu). The live
// exchange (runtime/live/tp/exchange.cpp: repartition and activation redistribution) packs and
// unpacks every 1D/2D piece through these: the CPU loops for CPU tensors, the CUDA kernels for
// float32 device tensors in a CUDA build. The regions are cells of the boxes of
// runtime/core/placement.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>

// Region's accessors run in CUDA kernels too (reshard_pack.cu).
#ifdef __CUDACC__
#define SHARDGYM_HOST_DEVICE __host__ __device__
#else
#define SHARDGYM_HOST_DEVICE
#endif

namespace shardgym::kernels {

struct Region {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  SHARDGYM_HOST_DEVICE int64_t rows() const { return r1 - r0; }
  SHARDGYM_HOST_DEVICE int64_t cols() const { return c1 - c0; }
  SHARDGYM_HOST_DEVICE int64_t size() const { return rows() * cols(); }
  SHARDGYM_HOST_DEVICE bool empty() const { return rows() <= 0 || cols() <= 0; }
};

// Overlap of two regions (empty when they do not intersect).
Region intersect(const Region& a, const Region& b);

// Elements of `want` not covered by `have` (want − have), e.g. what a rank must receive.
int64_t missing_elements(const Region& want, const Region& have);

// Throws std::out_of_range when the region does not lie inside [rows, cols].
void check_region(const Region& r, int64_t rows, int64_t cols);

template <typename T>
void pack(const T* src, int64_t rows, int64_t cols, const Region& r, T* dst) {
  check_region(r, rows, cols);
  for (int64_t i = r.r0; i < r.r1; ++i) {
    const T* row = src + i * cols + r.c0;
    for (int64_t j = 0; j < r.cols(); ++j) *dst++ = row[j];
  }
}

template <typename T>
void unpack(const T* src, T* dst, int64_t rows, int64_t cols, const Region& r) {
  check_region(r, rows, cols);
  for (int64_t i = r.r0; i < r.r1; ++i) {
    T* row = dst + i * cols + r.c0;
    for (int64_t j = 0; j < r.cols(); ++j) row[j] = *src++;
  }
}

#ifdef SHARDGYM_WITH_CUDA
// Device versions; `stream` is a cudaStream_t (void* keeps CUDA headers out of this header).
void pack_cuda(const float* src, int64_t rows, int64_t cols, const Region& r, float* dst, void* stream);
void unpack_cuda(const float* src, float* dst, int64_t rows, int64_t cols, const Region& r, void* stream);
#endif

}  // namespace shardgym::kernels
