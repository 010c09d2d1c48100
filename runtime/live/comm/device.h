// Where a rank computes: the CPU, or one CUDA device. The only place outside comm/nccl.cpp that
// touches CUDA, so that the rest of runtime/live compiles unchanged against Debian's CPU-only
// LibTorch (the CUDA calls are compiled in with SHARDGYM_WITH_CUDA, else report "no CUDA").
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

namespace shardgym::live {

// True when this build has the CUDA parts (scripts/build_cuda.sh).
bool built_with_cuda();
// CUDA devices visible to this process; 0 without a CUDA build or without a GPU.
int cuda_device_count();
// Empty if `device` ("cpu" or "cuda") can run `ranks` ranks with `backend` ("gloo" or "nccl"),
// as threads of one process (`threads`) or as processes, in this build on this machine;
// otherwise why not.
std::string why_device_unusable(const std::string& device, const std::string& backend, int ranks,
                                bool threads);
// The CUDA device of the rank with index `local_rank` on its machine (LOCAL_RANK; for ranks
// as threads, the rank): local_rank modulo the visible devices.
int local_cuda_index(int local_rank);
// Blocks until every kernel queued on `device` has finished (no-op on the CPU), so that a
// wall-clock reading taken after it covers the GPU work queued before it.
void synchronize(const c10::Device& device);
// Peak bytes the CUDA caching allocator held on device `index` since the last reset (every
// rank on that device together), and its reset. 0 / no-op without CUDA.
int64_t cuda_peak_allocated_bytes(int index);
void cuda_reset_peak(int index);
// Bytes the CUDA caching allocator holds allocated on device `index` now. 0 without CUDA.
int64_t cuda_allocated_bytes(int index);

}  // namespace shardgym::live
