// GTEST_SKIP for the gpu-labelled tests: skips, saying why, unless this is a CUDA build that
// sees at least `n` GPUs.
#pragma once

#include <gtest/gtest.h>

#include "runtime/live/comm/device.h"

#define SHARDGYM_SKIP_WITHOUT_GPUS(n)                                                         \
  do {                                                                                        \
    if (!::shardgym::live::built_with_cuda())                                                 \
      GTEST_SKIP() << "CPU-only build (scripts/build_cuda.sh builds CUDA)";                   \
    if (::shardgym::live::cuda_device_count() < (n))                                          \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), "                                  \
                   << ::shardgym::live::cuda_device_count() << " visible";                    \
  } while (0)
