// VectorLearner: a learner with its own vectorised training loop (PPO), driven by the one
// Trainer (agents/trainer.h) that `train`, `bench learn` and `suite` share. The learner runs
// rollouts and updates; the Trainer evaluates after every update, keeps the best policy and
// decides restarts on stall, asking the learner to start afresh. An Agent that has such a
// loop hands it out through Agent::vector_learner().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardgym {

class VectorEnv;

// Progress of vectorised training, reported after every update.
struct TrainProgress {
  int update = 0;
  int64_t env_steps = 0;           // summed over envs, so far
  double wall_s = 0;               // since training started
  double mean_episode_return = 0;  // of the episodes that ended since the last report (NaN: none)
  int episodes = 0;
  // What the learner did during this update that a log should show, one line each (PPO's
  // plan searches); the Trainer hands them to its `say`.
  std::vector<std::string> notes;
};

class VectorLearner {
 public:
  virtual ~VectorLearner() = default;
  // Trains on `envs` for at least `steps` env steps (summed over envs); `on_progress` runs
  // after every update and stops the training early by returning false.
  virtual void train_vectorized(VectorEnv& envs, int64_t steps,
                                const std::function<bool(const TrainProgress&)>& on_progress) = 0;
  // Restart on stall: the seconds of training without an improving evaluation after which
  // the Trainer asks for a fresh start (0: never).
  virtual double restart_after_s() const { return 0; }
  // Starts afresh as run `run` (1, 2, ...): new parameters, optimizer state and generator from
  // a seed derived from the agent's and `run`, the envs reset before the next rollout; update
  // and step counts go on. Called from within on_progress.
  virtual void start_afresh(int run) {}
  // For work done on the learner's behalf between updates (a plan search, agents/polished.h):
  // a seed from the learner's own generator, so that one seed still fixes the whole run; and
  // env k's open episode dropped (someone else stepped it), the env reset before the next
  // rollout. Called from within on_progress.
  virtual uint64_t draw_seed() = 0;
  virtual void drop_episode(int env) = 0;
};

}  // namespace shardgym
