// Evaluation helpers behind `shardgym eval` and `shardgym compare`: one episode of an agent
// on an env, and a whole comparison of agents over seeds normalised to static Megatron-LM.
//
//   auto env = make_env(spec.env_id, spec);
//   auto agent = make_agent("greedy", env->spec(), 0);
//   EpisodeSummary s = run_episode(*env, *agent, /*seed=*/0, /*learn=*/false);
//
// Throughput counts repartition time: tokens of the episode / Σ (iteration + repartition).
// (Named EpisodeSummary because experiments/train.h already has an EpisodeStats.)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agents/agent.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym {

struct EpisodeSummary {
  std::string agent;
  uint64_t seed = 0;
  int steps = 0;
  double total_reward = 0;
  double tokens = 0;
  double time_s = 0;  // Σ (step latency + repartition)
  double repartition_s = 0;
  double throughput = 0;         // tokens / time_s
  double peak_memory_bytes = 0;  // fullest rank over the episode
  double energy_j = 0;
  double energy_per_token_j = 0;
  int failed_steps = 0;  // steps that came back with an error or out of memory (the
                         // episode then ends); their figures are not counted
  std::string error;     // the failed step's error when it was not out of memory ("" = none)
  std::string final_plan;
  double wall_s = 0;  // wall-clock time of the episode (agent + env)
  // (previous, this) step latency of each step that kept the plan of the step before: the same
  // iteration measured back to back, for the live noise check (experiments/noise_gate.h).
  std::vector<std::pair<double, double>> same_plan_pairs;
};

// Resets `env` with `seed`, calls agent.begin_episode(env) and set_training(learn), then acts
// until the episode ends. observe() gets every transition (online search agents need the
// rewards to act at all); update() is called after each step only when `learn`. A step that
// fails or runs out of memory ends the episode (Transition::failed, truncated): a plan in
// force that does not fit leaves no valid action.
//
// The one episode loop of the project: `shardgym train`, `eval` and `compare` all run their
// episodes through it; `hooks` let a caller look at the reset and at every step.
struct EpisodeHooks {
  // After reset, before the agent sees the episode; may throw to refuse it.
  std::function<void(const ResetResult&)> on_reset;
  // After every step, with the episode's figures so far (`so_far` includes this step).
  std::function<void(const StepResult& step, const EpisodeSummary& so_far)> on_step;
};
// Held-out evaluation seeds start here. PPO's training envs draw their seeds below 2^30
// (agents/ppo_train.cpp) and the plan search's from 2^40 (agents/polished.cpp), so a
// learner's greedy evaluation on kHeldOutSeedBase + k never replays an episode it trained or
// searched on.
inline constexpr uint64_t kHeldOutSeedBase = uint64_t{1} << 31;

EpisodeSummary run_episode(Env& env, Agent& agent, uint64_t seed, bool learn,
                           const EpisodeHooks& hooks = {});

// run_episode's loop one step at a time, for callers that step two episodes in turn. The
// constructor resets the env and begins the agent's episode; step() does nothing once the
// episode has ended. wall_s is from the reset to the last step, whatever ran in between.
class EpisodeRun {
 public:
  EpisodeRun(Env& env, Agent& agent, uint64_t seed, bool learn, const EpisodeHooks& hooks = {});
  void step();
  bool done() const { return done_; }
  EpisodeSummary summary() const;

 private:
  Env& env_;
  Agent& agent_;
  bool learn_;
  EpisodeHooks hooks_;
  std::chrono::steady_clock::time_point t0_;
  Observation obs_;
  std::vector<int32_t> plan_;  // the plan in force for obs_ (Info::plan_indices)
  EpisodeSummary s_;
  double last_ok_latency_s_ = -1;  // the step before's latency; < 0: it failed or none
  bool done_ = false;
};

// Two greedy episodes of the same seed stepped in turn (a, b, then b, a, ...), each on its
// own env: on a machine whose speed drifts from second to second, both see the same stretch
// of it, so the ratio of their throughputs is the plans' and not the drift's (`shardgym eval`
// on a live run: the agent against Megatron-LM). Both envs are reset before the first step;
// two live runs then hold their ranks at once, the idle one waiting for its next command.
std::pair<EpisodeSummary, EpisodeSummary> run_interleaved_episodes(Env& env_a, Agent& agent_a,
                                                                   Env& env_b, Agent& agent_b,
                                                                   uint64_t seed);

struct CompareOptions {
  std::string baseline = "megatron";  // the agent every figure is normalised to
  int train_episodes = 0;             // learning agents: episodes of training per seed first
  // Agent id → checkpoint to load instead of (or before) training.
  std::map<std::string, std::string> checkpoints;
  // Wraps the env of each evaluated (agent id, seed) episode, e.g. in RecordTrace; may be
  // empty. Training episodes (train_episodes) are not wrapped.
  std::function<std::unique_ptr<Env>(std::unique_ptr<Env>, const std::string& agent)> wrap_env;
  // Called after each evaluated episode (progress reporting); may be empty.
  std::function<void(const EpisodeSummary&)> on_episode;
};

struct AgentComparison {
  std::string agent;
  // Why the agent could not run on this experiment (e.g. an oracle on a live run, which
  // cannot estimate()); its episodes and ratios are then empty. "" = it ran.
  std::string not_run;
  std::vector<EpisodeSummary> episodes;  // one per seed, in seed order
  std::vector<double> throughput_ratio;  // agent / baseline, per seed (> 1: faster)
  std::vector<double> memory_ratio;      // peak memory agent / baseline
  std::vector<double> energy_ratio;      // energy per token agent / baseline
  double mean_throughput_ratio() const;
};

struct CompareResult {
  std::string baseline;
  std::vector<uint64_t> seeds;
  std::vector<EpisodeSummary> baseline_episodes;
  std::vector<AgentComparison> agents;  // in the order asked
};

// Builds the env with make_env(spec.env_id, spec), one fresh agent per (agent, seed) seeded
// with the seed, trains learners for options.train_episodes episodes (env seeds disjoint from
// the evaluation seeds), then evaluates one episode per seed with learn = false.
CompareResult compare(const ExperimentSpec& spec, const std::vector<std::string>& agents,
                      const std::vector<uint64_t>& seeds, const CompareOptions& options = {});

}  // namespace shardgym
