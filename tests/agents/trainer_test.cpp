// The trainer shared by train, bench learn and suite (agents/trainer.h): it evaluates after
// every update, keeps the best policy across updates and loads it back, tells the agent each
// evaluation, reports restarts and notes, and stops when its caller says so.
#include "agents/trainer.h"

#include <algorithm>
#include <cstdio>
#include <istream>
#include <ostream>

#include <gtest/gtest.h>

#include "agents/agent_util.h"
#include "env/vector_env.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

// A scripted learner: update u makes it version u; its policy takes, in every block, the
// (version mod n)-th of the n entries the mask allows, so versions play other plans and
// score other returns. A checkpoint holds the version.
class Scripted : public Agent {
 public:
  explicit Scripted(const EnvSpec& spec)
      : blocks_(spec.num_blocks),
        catalog_(spec.catalog_size),
        moves_(agents_detail::pipeline_moves(spec)) {}
  std::string name() const override { return "scripted"; }
  bool learns() const override { return true; }
  Action act(const Observation&, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>&) override {
    const auto allowed = agents_detail::allowed_entries(mask, blocks_, catalog_, moves_);
    Action a(blocks_);
    for (int b = 0; b < blocks_; ++b) a[b] = allowed[b][version % allowed[b].size()];
    if (moves_ > 0) a.push_back(0);
    return a;
  }
  bool train_vectorized(VectorEnv&, int64_t,
                        const std::function<bool(const TrainProgress&)>& on_progress) override {
    for (int u = 1; u <= updates; ++u) {
      version = u;
      TrainProgress p;
      p.update = u;
      p.notes = {"note " + std::to_string(u)};
      if (u >= 3) p.restarts = 1, p.restart_wall_s = {1.5}, p.restart_after_s = 20;
      if (!on_progress(p)) break;
    }
    return true;
  }
  void note_evaluation(double r) override { noted.push_back(r); }

  int version = 0, updates = 6;
  std::vector<double> noted;

 protected:
  void write_state(std::ostream& out) const override { out << version << "\n"; }
  void read_state(std::istream& in) override { in >> version; }

 private:
  int blocks_, catalog_, moves_;
};

struct Training {
  ExperimentSpec spec = agent_tests::sim_spec(2, 8);
  std::unique_ptr<Env> eval_env = agent_tests::sim_env(spec);
  VectorEnv envs{1, [this](int) { return agent_tests::sim_env(spec); }};
  std::string ckpt = agent_tests::temp_path("trainer_test_", "best.ckpt");
  ~Training() { std::remove(ckpt.c_str()); }
  // The greedy return of version v on the evaluation seed, played alone.
  double greedy(int v) {
    Scripted a(eval_env->spec());
    a.version = v;
    return run_episode(*eval_env, a, kHeldOutSeedBase, false).total_reward;
  }
};

TEST(Trainer, KeepsTheBestEvaluationAndLoadsItBack) {
  Training s;
  std::vector<double> want;
  int best_v = 0;
  for (int v = 1; v <= 6; ++v) {
    want.push_back(s.greedy(v));
    if (v == 1 || want.back() > want[best_v - 1]) best_v = v;
  }
  // The test needs versions that score differently, the best not the last.
  ASSERT_GT(*std::max_element(want.begin(), want.end()),
            *std::min_element(want.begin(), want.end()));
  ASSERT_NE(best_v, 6);
  Scripted agent(s.envs.spec());
  Trainer trainer(*s.eval_env, kHeldOutSeedBase, s.ckpt);
  std::vector<std::string> said;
  trainer.say = [&](const std::string& line) { said.push_back(line); };
  std::vector<bool> best_flags;
  ASSERT_TRUE(trainer.run(agent, s.envs, 100, [&](const TrainerUpdate& u) {
    EXPECT_DOUBLE_EQ(u.evaluation.total_reward, want[u.progress.update - 1]);
    best_flags.push_back(u.best);
    return true;
  }));
  EXPECT_EQ(agent.noted, want);      // every evaluation told to the agent, in order
  EXPECT_EQ(agent.version, best_v);  // the best policy loaded back
  EXPECT_EQ(trainer.best_update(), best_v);
  EXPECT_DOUBLE_EQ(trainer.best_return(), want[best_v - 1]);
  double running = -1e300;
  for (int v = 1; v <= 6; ++v) {
    EXPECT_EQ(best_flags[v - 1], want[v - 1] > running) << "update " << v;
    running = std::max(running, want[v - 1]);
  }
  // Notes every update, the restart once, when it first shows.
  const std::vector<std::string> lines = {
      "note 1", "note 2", "restart 1 at 1.5 s, after 20 s without improvement", "note 3", "note 4",
      "note 5", "note 6"};
  EXPECT_EQ(said, lines);
}

TEST(Trainer, SeveralHeldOutEnvsScoreThePolicyByTheirMeanReturn) {
  Training s;
  std::unique_ptr<Env> second = agent_tests::sim_env(s.spec);
  const uint64_t seed2 = kHeldOutSeedBase + 7;
  std::vector<double> first, mean;
  int best_v = 0;
  for (int v = 1; v <= 6; ++v) {
    Scripted a(s.eval_env->spec());
    a.version = v;
    first.push_back(run_episode(*s.eval_env, a, kHeldOutSeedBase, false).total_reward);
    const double other = run_episode(*second, a, seed2, false).total_reward;
    mean.push_back((first.back() + other) / 2);
    if (v == 1 || mean.back() > mean[best_v - 1]) best_v = v;
  }
  Scripted agent(s.envs.spec());
  Trainer trainer({{s.eval_env.get(), kHeldOutSeedBase}, {second.get(), seed2}}, s.ckpt);
  ASSERT_TRUE(trainer.run(agent, s.envs, 100, [&](const TrainerUpdate& u) {
    EXPECT_DOUBLE_EQ(u.evaluation.total_reward, first[u.progress.update - 1]);  // the first env's
    EXPECT_DOUBLE_EQ(u.score, mean[u.progress.update - 1]);
    return true;
  }));
  EXPECT_EQ(agent.noted, mean);  // the agent is told the score
  EXPECT_EQ(agent.version, best_v);
  EXPECT_DOUBLE_EQ(trainer.best_return(), mean[best_v - 1]);
  EXPECT_THROW(Trainer({}, ""), std::invalid_argument);
}

TEST(Trainer, StopsWhenItsCallerSaysSoAndSkipsAgentsWithoutVectorisedTraining) {
  Training s;
  Scripted agent(s.envs.spec());
  Trainer trainer(*s.eval_env, kHeldOutSeedBase, "");
  int calls = 0;
  EXPECT_TRUE(trainer.run(agent, s.envs, 100, [&](const TrainerUpdate&) { return ++calls < 2; }));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(agent.noted.size(), 2u);
  EXPECT_EQ(agent.version, 2);  // no checkpoint: nothing to load back
  auto random = make_agent("random", s.envs.spec(), 0);
  calls = 0;
  EXPECT_FALSE(trainer.run(*random, s.envs, 100, [&](const TrainerUpdate&) { return ++calls; }));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace shardgym
