// One comparison of two measurements, field by field and exactly, for tests whose two runs
// must agree to the bit (a run and its clone, a replay and its recording, shared and private
// costs).
#pragma once

#include <gtest/gtest.h>

#include "runtime/core/measurement.h"

namespace shardgym::testing {

inline void expect_same_measurement(const Measurement& got, const Measurement& want) {
  EXPECT_EQ(got.ok, want.ok) << got.error;
  EXPECT_EQ(got.oom, want.oom);
  EXPECT_EQ(got.step_latency_s, want.step_latency_s);
  EXPECT_EQ(got.repartition_s, want.repartition_s);
  EXPECT_EQ(got.repartition_bytes, want.repartition_bytes);
  EXPECT_EQ(got.energy_j, want.energy_j);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.block_fwd_s, want.block_fwd_s);
  EXPECT_EQ(got.block_bwd_s, want.block_bwd_s);
  EXPECT_EQ(got.block_comm_s, want.block_comm_s);
  EXPECT_EQ(got.peak_memory_bytes, want.peak_memory_bytes);
}

}  // namespace shardgym::testing
