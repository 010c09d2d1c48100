#include "agents/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace shardgym {

Trainer::Trainer(Env& eval_env, uint64_t eval_seed, std::string checkpoint)
    : Trainer(std::vector<Held>{{&eval_env, eval_seed}}, std::move(checkpoint)) {}

Trainer::Trainer(std::vector<Held> evals, std::string checkpoint)
    : evals_(std::move(evals)), checkpoint_(std::move(checkpoint)) {
  if (evals_.empty()) throw std::invalid_argument("Trainer: no held-out env to evaluate on");
}

bool Trainer::run(Agent& agent, VectorEnv& envs, int64_t steps,
                  const std::function<bool(const TrainerUpdate&)>& on_update) {
  VectorLearner* learner = agent.vector_learner();
  if (!learner) return false;
  const auto t0 = std::chrono::steady_clock::now();
  auto since_t0 = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double restart_after_s = learner->restart_after_s();
  StallWatch watch(restart_after_s);
  watch.start(0);
  restart_wall_s_.clear();
  bool saved = false;
  learner->train_vectorized(envs, steps, [&](const TrainProgress& p) {
    EpisodeSummary eval;
    double score = 0;
    for (size_t k = 0; k < evals_.size(); ++k) {
      EpisodeSummary e = run_episode(*evals_[k].env, agent, evals_[k].seed, /*learn=*/false);
      score += e.total_reward / static_cast<double>(evals_.size());
      if (k == 0) eval = std::move(e);
    }
    agent.set_training(true);
    if (say)
      for (const std::string& note : p.notes) say(note);
    // The best across restarts: a restart starts a new network, never a new best.
    const bool best = score > best_return_;
    if (best) {
      best_return_ = score;
      best_update_ = p.update;
      if (!checkpoint_.empty()) {
        agent.save(checkpoint_);
        saved = true;
      }
    }
    if (on_update && !on_update(TrainerUpdate{p, eval, score, best, best_return_})) return false;
    // The stall clock reads after the evaluation: its time counts as training time. No
    // restart once the steps are done: nothing would train the fresh run.
    if (p.env_steps < steps && watch.observe(since_t0(), score)) {
      const double now = since_t0();
      restart_wall_s_.push_back(now);
      learner->start_afresh(static_cast<int>(restart_wall_s_.size()));
      watch.start(now);
      if (say) say(restart_line(static_cast<int>(restart_wall_s_.size()), now, restart_after_s));
    }
    return true;
  });
  if (saved) agent.load(checkpoint_);
  return true;
}

void StallWatch::start(double now_s) {
  best_ = -std::numeric_limits<double>::infinity();
  since_ = now_s;
}

bool StallWatch::observe(double now_s, double eval_return) {
  if (std::isnan(eval_return)) return false;
  if (std::isinf(best_) || eval_return > best_ + kMinGain * std::max(std::abs(best_), 1e-9)) {
    best_ = eval_return;
    since_ = now_s;
    return false;
  }
  return restart_s_ > 0 && now_s - since_ >= restart_s_;
}

std::string restart_line(int restart, double wall_s, double after_s) {
  char line[160];
  std::snprintf(line, sizeof line, "restart %d at %.1f s, after %g s without improvement",
                restart, wall_s, after_s);  // 20, 2.5, 1e-09
  return line;
}

}  // namespace shardgym
