// A tiny live experiment for the tests: 2 layers, h = 32, 4 heads, seq 16, global batch 8,
// byte vocabulary, on P CPU "devices" of one node. Steps take milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/experiment_spec.h"
#include "runtime/live/driver/live_run.h"

namespace shardgym::live {

inline ExperimentSpec tiny_live_spec(int ranks, const std::string& launch) {
  ExperimentSpec s;
  s.name = "live-test";
  s.env_id = "shardgym/TPLive-v0";
  s.model.name = "gpt-tiny";
  s.model.layers = 2;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.seq = 16;
  s.model.micro_batch = 8;  // = global_batch: each plan runs its share at once unless a test sets m
  s.model.global_batch = 8;
  s.model.vocab = 256;
  s.model.dtype = DType::kFloat32;
  s.model.mixed_precision = false;
  DeviceType cpu;
  cpu.name = "cpu-rank";
  cpu.peak_flops = 5e10;
  cpu.memory_bytes = 4.0 * (1 << 30);
  cpu.memory_bw = 1e10;
  cpu.idle_w = 5;
  cpu.busy_w = 15;
  LinkClass loop;
  loop.name = "loopback";
  loop.bandwidth = 2e9;
  loop.latency_s = 2e-5;
  s.cluster.name = "cpu-" + std::to_string(ranks);
  s.cluster.devices = {cpu};
  s.cluster.links = {loop};
  s.cluster.nodes = {NodeSpec{"cpu-rank", ranks, "loopback"}};
  s.catalog.chunks = {1, 2};
  s.live.ranks = ranks;
  s.live.launch = launch;
  s.live.precision = "float32";
  s.live.timeout_s = 10;
  s.live.threads_per_rank = 1;
  s.live.extra.lr = 1e-2;
  s.initial_plan = "uniform:dp";
  s.episodes = 1;
  s.steps_per_episode = 4;
  return s;
}

// Steps staged[i] on one live run and flat[i] (the same blocks on one stage) on another, both
// reset from `seed` with their first plan; every step must run and the losses agree to
// float64 rounding (1e-9). Returns the staged run's measurements.
inline std::vector<Measurement> expect_losses_of_one_stage(const ExperimentSpec& spec,
                                                           const std::vector<Plan>& staged,
                                                           const std::vector<Plan>& flat,
                                                           uint64_t seed = 9) {
  LiveRun a(spec), b(spec);
  for (const Plan& p : staged) EXPECT_EQ(b.why_invalid(p), "") << p.to_string();
  a.reset(seed, flat.front());
  b.reset(seed, staged.front());
  std::vector<Measurement> out;
  for (size_t i = 0; i < staged.size(); ++i) {
    const Measurement f = a.step(flat[i]), g = b.step(staged[i]);
    EXPECT_TRUE(f.ok) << f.error;
    EXPECT_TRUE(g.ok) << g.error;
    EXPECT_NEAR(g.loss, f.loss, 1e-9 * f.loss) << staged[i].to_string();
    out.push_back(g);
  }
  return out;
}

}  // namespace shardgym::live
