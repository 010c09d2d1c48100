#include "agents/trainer.h"

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
  bool saved = false;
  int restarts_reported = 0;
  const bool trained = agent.train_vectorized(envs, steps, [&](const TrainProgress& p) {
    EpisodeSummary eval;
    double score = 0;
    for (size_t k = 0; k < evals_.size(); ++k) {
      EpisodeSummary e = run_episode(*evals_[k].env, agent, evals_[k].seed, /*learn=*/false);
      score += e.total_reward / static_cast<double>(evals_.size());
      if (k == 0) eval = std::move(e);
    }
    agent.set_training(true);
    agent.note_evaluation(score);  // restart on stall (ppo restart_s) reads it
    if (say) {
      if (p.restarts > restarts_reported) say(restart_line(p));
      for (const std::string& note : p.notes) say(note);
    }
    restarts_reported = p.restarts;
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
    return on_update ? on_update(TrainerUpdate{p, eval, score, best, best_return_}) : true;
  });
  if (trained && saved) agent.load(checkpoint_);
  return trained;
}

std::string restart_line(const TrainProgress& p) {
  if (p.restarts < 1 || p.restart_wall_s.empty()) return {};
  char line[160];
  std::snprintf(line, sizeof line, "restart %d at %.1f s, after %g s without improvement",
                p.restarts, p.restart_wall_s.back(), p.restart_after_s);  // 20, 2.5, 1e-09
  return line;
}

}  // namespace shardgym
