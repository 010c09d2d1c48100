// Training runner behind `shardgym train`: the experiment's env (make_env, so TimeLimit and
// the Megatron-normalised reward are on) wrapped in RecordTrace → DIR/trace.h5, the configured
// agent acting on it for the configured episodes, learners fed observe()/update() every step
// and checkpointed to DIR/agent.ckpt at the end. With `agent.train_steps` > 0, a learner that
// has vectorised training (PPO) first trains that many env steps on `train_envs` copies of
// the env (not recorded: the trace holds the episodes that follow, which then evaluate the
// trained policy greedily instead of learning on). After every update the policy plays one
// greedy episode on a held-out seed; the best one is kept. DIR/learning.csv gets one row per
// update: env steps (every step the learner caused, its searches and those evaluations
// included), wall time and the evaluation's return. A task whose scenario draws its
// events trains and picks on other instances than the config's `instance`, which the recorded
// episodes play.
//
// Every step is also compared with the static Megatron-LM plan under the same conditions
// (the noise-free baseline NormalizeReward computes, or the run's estimate() when the reward
// is not normalised), so the summary can say how the agent's throughput — repartition time
// included — compares with simply never repartitioning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agents/agent.h"
#include "agents/learner.h"
#include "analysis/table.h"
#include "experiments/progress.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym {

struct TrainOptions {
  std::string out_dir;              // created if missing; trace.h5 and agent.ckpt go here
  std::optional<uint64_t> seed;     // overrides the config's first seed
  std::optional<int> episodes;      // overrides `episodes`
  std::optional<int> steps;         // overrides `steps_per_episode`
  std::optional<int> train_steps;   // overrides `agent.train_steps`
  std::string git_sha = "unknown";  // stored in the trace
  Progress* progress = nullptr;     // optional
  int train_envs = 8;               // envs of vectorised training (agent.train_steps > 0)
};

struct EpisodeStats {
  int episode = 0;
  uint64_t seed = 0;
  int steps = 0;
  double mean_reward = 0;
  // Σ tokens / Σ (iteration + repartition) over the steps that did not fail.
  double mean_throughput = 0;
  // The same for the static Megatron plan under each step's conditions; 0 = unknown.
  double megatron_throughput = 0;
  double repartition_s = 0;  // total repartition time charged in the episode
  int failed_steps = 0;      // failed steps (error or out of memory); one ends the episode
  std::string error;         // the failed step's error when it was not out of memory
  std::string final_plan;
};

struct TrainResult {
  std::string agent;
  std::vector<TrainProgress> training;  // one per update of vectorised training (may be empty)
  int best_update = 0;  // the update whose policy was kept (best greedy evaluation episode)
  std::string env_id;
  std::string trace_path;
  std::string checkpoint_path;  // "" when the agent does not learn
  std::vector<EpisodeStats> episodes;
};

// Applies the overrides to `spec` (seeds = {seed}, episodes, steps_per_episode) and runs.
// Throws std::invalid_argument / std::runtime_error from the env, agent or trace writer.
TrainResult run_training(ExperimentSpec spec, const TrainOptions& options);

// Per-episode table: episode, seed, steps, mean reward, throughput, Megatron, ratio.
Table training_summary(const TrainResult& result);

}  // namespace shardgym
