// Sample-efficiency benchmark behind `shardgym bench learn`: wall time for a learning agent
// (PPO by default) trained on a vector env of the experiment to reach a fraction of the static
// oracle's return.
//
// Before training, the oracle (exact chain DP on the cost model, `oracle`, or
// `dynamic-oracle` for scenarios with events), Megatron-LM and
// ATP each play one evaluation episode on the evaluation seed. After every update the learner
// plays the same episode greedily (set_training(false)); the clock keeps running through these
// evaluations, so the reported time is everything a user would wait, and every env step is
// counted: rollouts, searches inside the learner (PPO's polish) and those evaluations. The run stops when the
// evaluation return reaches `threshold` × the oracle's, or at the step or time budget.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agents/evaluate.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym {

struct LearnBenchOptions {
  std::string agent_id;          // "" = the config's agent if it learns, else "ppo"
  std::string oracle_id = "oracle";
  int envs = 8;                  // training envs (VectorEnv)
  int threads = 0;               // of the vector env; 0 = min(envs, hardware threads)
  int64_t max_steps = 400000;    // env steps of training, summed over envs
  double budget_s = 600;         // wall-clock budget
  double threshold = 0.95;       // of the oracle's return
  bool stop_at_threshold = true;
  uint64_t seed = 0;             // agent and training envs
  uint64_t eval_seed = kHeldOutSeedBase;  // the evaluation episode (no training env's)
  std::string save_path;         // checkpoint of the best evaluated policy ("" = none)
  std::function<void(const std::string&)> on_line;  // progress lines; may be empty
};

// Env steps are counted where they happen (CountSteps around every env the run steps), so a
// learner's own searches and restarts count with its rollouts, whatever the agent.
struct LearnBenchPoint {
  int update = 0;
  int64_t training_steps = 0;     // of training rollouts (the learner's own count)
  int64_t search_steps = 0;       // other steps on the training envs: searches inside the learner
  int64_t eval_steps = 0;         // of the greedy evaluation episodes so far (they pick the policy)
  int64_t env_steps = 0;          // all of the above: what the result cost in env steps
  double wall_s = 0;
  double eval_return = 0;
  double eval_throughput = 0;     // tokens/s of the evaluation episode, repartition included
  double train_return = 0;        // mean return of training episodes ended since the last point
};

struct LearnBenchResult {
  std::string agent;
  std::string config_name;
  int envs = 0;
  double oracle_return = 0, megatron_return = 0, atp_return = 0;
  double oracle_throughput = 0, megatron_throughput = 0, atp_throughput = 0;
  double threshold = 0.95;
  std::vector<LearnBenchPoint> points;
  bool reached = false;
  double time_to_threshold_s = 0;  // wall time at the first evaluation at or above it
  int64_t steps_to_threshold = 0;
  double wall_s = 0;               // whole run, evaluations included
  double eval_wall_s = 0;          // of which evaluations
  std::vector<double> restart_wall_s;  // restarts on stall (ppo restart_s): when each began
  const LearnBenchPoint* best() const;
};

// Throws std::invalid_argument when the agent cannot train on a vector env.
LearnBenchResult bench_learning(const ExperimentSpec& spec, const LearnBenchOptions& options);

std::string learn_bench_to_text(const LearnBenchResult& r);
std::string learn_bench_to_json(const LearnBenchResult& r);

}  // namespace shardgym
