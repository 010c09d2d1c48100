// Polished: the plan search (agents/plan_polish.h) as an agent of its own, around any learner
// with a vectorised training loop (agents/learner.h). `ppo(polish=N)` is PPO inside it.
//
// Every `every` updates of the learner's training (the first after `every`; a search that
// keeps nothing doubles the wait before the next), the search plays greedy episodes of this
// agent (the learner's greedy action, then the substitution tables) on the training env 0 and
// keeps the substitutions that gain (polish_plans); the learner drops env 0's open episode and
// draws the search's seeds from its own generator (VectorLearner::draw_seed), so one seed
// still fixes the whole run. The learner never sees the tables: it samples and learns as it
// would alone. In evaluation (set_training(false)) act applies them to the learner's action.
// A restart of the learner (start_afresh) clears them and searches again after its first
// update. Each search is reported in TrainProgress::notes.
//
// Checkpoints: a record file (agents/checkpoint_file.h) of kind "polished" holding the
// learner's own checkpoint bytes (record "inner") and the tables ("sub", "sub_keys"), every
// value checked before use. A PPO checkpoint that carries the tables itself (written before
// the search was an agent of its own) loads too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agents/agent.h"
#include "agents/learner.h"
#include "agents/plan_polish.h"

namespace shardgym {

class Polished : public Agent, public VectorLearner {
 public:
  // `inner` must have a VectorLearner (std::invalid_argument otherwise). every ≥ 1 updates;
  // gain: the relative gain a substitution must show on each of two seeds (polish_plans).
  Polished(std::unique_ptr<Agent> inner, const EnvSpec& spec, int every, double gain);

  // The learner's name: a trace or a checkpoint names the policy, not the search around it.
  std::string name() const override { return inner_->name(); }
  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& plan) override;
  void observe(const Transition& t) override { inner_->observe(t); }
  bool update() override { return inner_->update(); }
  void begin_episode(Env& env) override { inner_->begin_episode(env); }
  bool learns() const override { return inner_->learns(); }
  void set_training(bool training) override;
  std::string save_bytes() const override;
  void load_bytes(const std::string& bytes, const std::string& where) override;
  size_t max_checkpoint_bytes() const override;

  VectorLearner* vector_learner() override { return this; }
  void train_vectorized(VectorEnv& envs, int64_t steps,
                        const std::function<bool(const TrainProgress&)>& on_progress) override;
  double restart_after_s() const override { return learner_->restart_after_s(); }
  void start_afresh(int run) override;
  uint64_t draw_seed() override { return learner_->draw_seed(); }
  void drop_episode(int env) override { learner_->drop_episode(env); }

  Agent& inner() { return *inner_; }
  const SubstitutionTables& tables() const { return tables_; }

 private:
  // The search on greedy episodes of `env` after update `update`; its line goes to `notes`.
  // Returns the substitutions kept.
  int search(Env& env, int update, std::vector<std::string>& notes);

  std::unique_ptr<Agent> inner_;
  VectorLearner* learner_;
  SubstitutionTables tables_;
  int every_;
  double gain_;
  bool training_ = true;
  int next_ = 0, wait_ = 0;  // the update after which the next search runs; the wait before it
};

}  // namespace shardgym
