// Trainer: the one loop around a learner's vectorised training, shared by `shardgym train`,
// `bench learn` and `suite`. After every update it plays one greedy episode of the policy on
// each held-out env and seed (the caller's envs: it decides which instances those are and
// counts their steps), scores the policy by their mean return, tells the agent that score
// (restart on stall), keeps the best policy across
// restarts (saved as soon as it is picked: temporary file, fsync, rename; loaded back at the
// end), and reports the learner's restarts and notes as lines.
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

  // Receives the learner's restarts ("restart N at W s, ...") and notes, one line each;
  // empty: they are not reported.
  std::function<void(const std::string&)> say;

  // Trains `agent` on `envs` for `steps` env steps (Agent::train_vectorized), evaluating after
  // every update; `on_update` (may be empty) runs after each evaluation and stops the training
  // by returning false. The best policy saved is loaded back at the end. Returns false, doing
  // nothing, when the agent has no vectorised training.
  bool run(Agent& agent, VectorEnv& envs, int64_t steps,
           const std::function<bool(const TrainerUpdate&)>& on_update = {});

  double best_return() const { return best_return_; }  // the best score
  int best_update() const { return best_update_; }  // -1: no evaluation yet

 private:
  std::vector<Held> evals_;
  std::string checkpoint_;
  double best_return_ = -std::numeric_limits<double>::infinity();
  int best_update_ = -1;
};

// "restart N at W s, after R s without improvement" for the latest restart of vectorised
// training (p.restarts > 0; empty otherwise).
std::string restart_line(const TrainProgress& p);

}  // namespace shardgym
