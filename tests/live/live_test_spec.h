// A tiny live experiment for the tests: 2 layers, h = 32, 4 heads, seq 16, global batch 8,
// byte vocabulary, on P CPU "devices" of one node. Steps take milliseconds.
#pragma once

#include <string>

#include "runtime/core/experiment_spec.h"

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

}  // namespace shardgym::live
