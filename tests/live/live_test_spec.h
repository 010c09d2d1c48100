// A tiny live experiment for the tests: 2 layers, h = 32, 4 heads, seq 16, global batch 8,
// byte vocabulary, on P CPU "devices" of one node. Steps take milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
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

// Resets run `a` with the first pair's first plan and `b` with its second from `seed`, then
// steps both through `plans`: every step must run and b's loss be a's to float64 rounding
// (1e-9). Each step's measurements of a and b.
inline std::vector<std::pair<Measurement, Measurement>> expect_same_losses(
    LiveRun& a, LiveRun& b, const std::vector<std::pair<Plan, Plan>>& plans, uint64_t seed) {
  a.reset(seed, plans.front().first);
  b.reset(seed, plans.front().second);
  std::vector<std::pair<Measurement, Measurement>> out;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Measurement f = a.step(plans[i].first), g = b.step(plans[i].second);
    EXPECT_TRUE(f.ok) << f.error;
    EXPECT_TRUE(g.ok) << g.error;
    EXPECT_NEAR(g.loss, f.loss, 1e-9 * f.loss)
        << "step " << i << ": " << plans[i].second.to_string();
    out.push_back({f, g});
  }
  return out;
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
  std::vector<std::pair<Plan, Plan>> plans;
  for (size_t i = 0; i < staged.size(); ++i) plans.push_back({flat[i], staged[i]});
  std::vector<Measurement> out;
  for (const auto& [f, g] : expect_same_losses(a, b, plans, seed)) out.push_back(g);
  return out;
}

// Two pipeline stages of tp1d(t=2) blocks on 4 ranks: 1F1B over 2 micro-batches, then a
// boundary move (split 3/1), then `last`.
inline std::vector<std::string> two_stage_plans(const std::string& last) {
  return {"uniform:tp1d(t=2)@pp(p=2,m=2)", "uniform:tp1d(t=2)@pp(p=2,m=2,split=3/1)", last};
}

// The same over plan texts, parsed for `spec`'s model.
inline std::vector<Measurement> expect_losses_of_one_stage(const ExperimentSpec& spec,
                                                           const std::vector<std::string>& staged,
                                                           const std::vector<std::string>& flat) {
  const int blocks = spec.model.num_blocks();
  std::vector<Plan> s, f;
  for (const std::string& text : staged) s.push_back(Plan::parse(text, blocks));
  for (const std::string& text : flat) f.push_back(Plan::parse(text, blocks));
  return expect_losses_of_one_stage(spec, s, f);
}

}  // namespace shardgym::live
