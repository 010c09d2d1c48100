// Simulator throughput benchmark behind `shardgym bench sim`: how many env steps per second
// one thread gets out of a bare PartitionEnv over the simulated run (no wrappers, no trace),
// on a 32-layer GPT over 64 simulated GPUs (8 nodes × 8, NVSwitch inside, InfiniBand across).
//
// Two figures: "changing plans", where every step changes one to three blocks as an agent
// would (actions drawn from the action mask and recorded in a pool *before* timing, then
// replayed, so the timing holds the env only), and "same plan", where the plan never changes.
// The target is 200,000 steps/s (large-scale RL needs millions of steps per hour per core).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/core/experiment_spec.h"

namespace shardgym {

struct BenchOptions {
  double seconds = 2.0;  // wall time of each timed phase
  uint64_t seed = 0;
  int pool_size = 4096;  // recorded actions replayed in a loop
};

struct BenchPhase {
  int64_t steps = 0;
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // this thread's CPU time: the figure to trust on a loaded machine
  double steps_per_s() const { return seconds > 0 ? steps / seconds : 0; }
  double steps_per_cpu_s() const { return cpu_seconds > 0 ? steps / cpu_seconds : 0; }
};

struct BenchResult {
  std::string env_id;
  std::string workload;  // "gpt 32 layers, 64 blocks, 64 GPUs (8x8), catalog K=..."
  int num_blocks = 0;
  int catalog_size = 0;
  int world = 0;
  int pool_size = 0;
  int pool_episode_ends = 0;  // pool steps that ended the episode (each followed by a reset)
  BenchPhase changing;        // 1–3 blocks change per step
  BenchPhase same_plan;       // plan unchanged
  double target_steps_per_s = 200000;
};

// The benchmark's experiment (also useful to reproduce it from code).
ExperimentSpec bench_sim_spec();
BenchResult bench_sim(const BenchOptions& options);

std::string bench_to_json(const BenchResult& r);
std::string bench_to_text(const BenchResult& r);

}  // namespace shardgym
