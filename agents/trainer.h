// Trainer: the one loop around a learner's vectorised training (agents/learner.h), shared by
// `shardgym train`, `bench learn` and `suite`. After every update it plays one greedy episode
// of the policy on each held-out env and seed (the caller's envs: it decides which instances
// those are and counts their steps), scores the policy by their mean return, keeps the best
// policy across restarts (saved as soon as it is picked: temporary file, fsync, rename; loaded
// back at the end), restarts the learner when its scores stall (StallWatch, below, with the
// learner's restart_after_s), and reports the learner's notes and its restarts as lines.
//
//   CountSteps eval_env(make_env(spec.env_id, spec), counter);
//   Trainer trainer(eval_env, kHeldOutSeedBase + seed, "runs/x/agent.ckpt");
//   trainer.say = [&](const std::string& line) { std::cerr << line << "\n"; };
//   const bool trained = trainer.run(agent, envs, 20000, [&](const TrainerUpdate& u) {
//     log(u.progress.update, u.evaluation.total_reward);
//     return true;  // false stops the training
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "agents/learner.h"

namespace shardgym {

class VectorEnv;

// What the trainer hands its caller after each update and evaluation.
struct TrainerUpdate {
  const TrainProgress& progress;
  const EpisodeSummary& evaluation;  // the greedy episode after this update (the first env's)
  double score = 0;                  // the mean return of the greedy episodes after this update
  bool best = false;                 // it returned more than every evaluation before it
  double best_return = 0;            // the best evaluation's return so far (this one included)
};

// Decides restarts on stall from the stream of evaluations of one run. An evaluation
// improves when it beats the run's best so far by more than kMinGain · max(|best|, 1e-9):
// the failing seeds sit exactly on Megatron-LM's score (docs/benchmarks.md, "PPO across
// training seeds"), so any gain above float rounding of an episode's summed return would do;
// 0.1 % keeps a policy that only jitters by a hair around its best from counting as progress
// while staying well below the 0.6 % between Megatron-LM's plan (0.944 of the oracle) and the
// 0.95 target on periodic-congestion, so a real step toward the target counts.
class StallWatch {
 public:
  static constexpr double kMinGain = 1e-3;
  explicit StallWatch(double restart_s) : restart_s_(restart_s) {}
  // A new run begins at now_s (no best yet).
  void start(double now_s);
  // An evaluation at now_s; true when the run has gone restart_s seconds without improving
  // (then call start() for the next run). Never true with restart_s = 0.
  bool observe(double now_s, double eval_return);
  double best() const { return best_; }

 private:
  double restart_s_;
  double best_ = -std::numeric_limits<double>::infinity();
  double since_ = 0;
};

class Trainer {
 public:
  // checkpoint: where the best policy goes ("" = the best is tracked but not saved).
  Trainer(Env& eval_env, uint64_t eval_seed, std::string checkpoint);
  // Several held-out envs, each with its seed (at least one): the policy kept is the one whose
  // greedy episodes on them return most on average.
  struct Held {
    Env* env;
    uint64_t seed;
  };
  Trainer(std::vector<Held> evals, std::string checkpoint);

  // Receives the learner's notes and each restart ("restart N at W s, ..."), one line each;
  // empty: they are not reported.
  std::function<void(const std::string&)> say;

  // Trains `agent` on `envs` for `steps` env steps (its VectorLearner), evaluating after every
  // update; `on_update` (may be empty) runs after each evaluation and stops the training by
  // returning false. When the learner asks for restarts on stall (restart_after_s > 0) and the
  // score has not improved for that long (wall time since run() began, evaluations included),
  // the learner starts afresh (never after the last update). The best policy saved is loaded
  // back at the end. Returns false, doing nothing, when the agent has no vectorised training.
  bool run(Agent& agent, VectorEnv& envs, int64_t steps,
           const std::function<bool(const TrainerUpdate&)>& on_update = {});

  double best_return() const { return best_return_; }  // the best score
  int best_update() const { return best_update_; }  // -1: no evaluation yet
  // When each restart of the last run() began (s since it began), in order.
  const std::vector<double>& restart_wall_s() const { return restart_wall_s_; }

 private:
  std::vector<Held> evals_;
  std::string checkpoint_;
  double best_return_ = -std::numeric_limits<double>::infinity();
  int best_update_ = -1;
  std::vector<double> restart_wall_s_;
};

// "restart N at W s, after R s without improvement".
std::string restart_line(int restart, double wall_s, double after_s);

}  // namespace shardgym
