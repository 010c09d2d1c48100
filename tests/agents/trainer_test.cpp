// The trainer shared by train, bench learn and suite (agents/trainer.h): it evaluates after
// every update, keeps the best policy across updates and loads it back, restarts a learner
// whose scores stall, reports restarts and notes, and stops when its caller says so.
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
// score other returns. A checkpoint holds the version. With `frozen` updates leave the version
// as it is (every score the same: a stall).
class Scripted : public Agent, public VectorLearner {
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
  VectorLearner* vector_learner() override { return this; }
  void train_vectorized(VectorEnv&, int64_t,
                        const std::function<bool(const TrainProgress&)>& on_progress) override {
    for (int u = 1; u <= updates; ++u) {
      if (!frozen) version = u;
      TrainProgress p;
      p.update = u;
      p.env_steps = 10 * u;
      p.notes = {"note " + std::to_string(u)};
      ++progress_calls;
      if (!on_progress(p)) break;
    }
  }
  double restart_after_s() const override { return restart_after; }
  void start_afresh(int run) override { runs.push_back(run); }
  uint64_t draw_seed() override { return 0; }
  void drop_episode(int) override {}

  int version = 0, updates = 6, progress_calls = 0;
  bool frozen = false;
  double restart_after = 0;
  std::vector<int> runs;  // start_afresh's calls

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
  EXPECT_EQ(agent.version, best_v);  // the best policy loaded back
  EXPECT_EQ(trainer.best_update(), best_v);
  EXPECT_DOUBLE_EQ(trainer.best_return(), want[best_v - 1]);
  double running = -1e300;
  for (int v = 1; v <= 6; ++v) {
    EXPECT_EQ(best_flags[v - 1], want[v - 1] > running) << "update " << v;
    running = std::max(running, want[v - 1]);
  }
  // Notes every update; restarts off (restart_after_s 0): none.
  EXPECT_EQ(said, (std::vector<std::string>{"note 1", "note 2", "note 3", "note 4", "note 5",
                                             "note 6"}));
  EXPECT_TRUE(agent.runs.empty());
  EXPECT_TRUE(trainer.restart_wall_s().empty());
}

// A learner asking for restarts on stall (a tiny restart_after_s: any score that does not beat
// its run's best restarts) whose scores never move: updates 1, 3, 5 set a fresh run's best,
// 2 and 4 stall and start runs 1 and 2, announced after that update's notes; 6 is the last
// update (its steps reach the budget) and restarts nothing.
TEST(Trainer, RestartsALearnerWhoseScoresStall) {
  Training s;
  Scripted agent(s.envs.spec());
  agent.frozen = true;
  agent.version = 1;
  agent.restart_after = 1e-9;
  Trainer trainer(*s.eval_env, kHeldOutSeedBase, "");
  std::vector<std::string> said;
  trainer.say = [&](const std::string& line) { said.push_back(line); };
  ASSERT_TRUE(trainer.run(agent, s.envs, 60));
  EXPECT_EQ(agent.runs, (std::vector<int>{1, 2}));
  ASSERT_EQ(trainer.restart_wall_s().size(), 2u);
  EXPECT_LE(trainer.restart_wall_s()[0], trainer.restart_wall_s()[1]);
  ASSERT_EQ(said.size(), 8u);
  EXPECT_EQ(said[2].rfind("restart 1 at ", 0), 0u) << said[2];
  EXPECT_NE(said[2].find("after 1e-09 s without improvement"), std::string::npos) << said[2];
  EXPECT_EQ(said[5].rfind("restart 2 at ", 0), 0u) << said[5];
  EXPECT_EQ(said[7], "note 6");
}

// StallWatch: a run improves when an evaluation beats its best by more than kMinGain.
TEST(Trainer, StallWatchRestartsOnlyAfterRestartSecondsWithoutImprovement) {
  StallWatch w(/*restart_s=*/10);
  w.start(0);
  EXPECT_FALSE(w.observe(1, 0.90));    // the run's first evaluation: its best
  EXPECT_FALSE(w.observe(5, 0.9005));  // +0.06 %: below kMinGain (0.1 %), not progress
  EXPECT_FALSE(w.observe(10.9, 0.90));
  EXPECT_TRUE(w.observe(11, 0.90));  // 10 s since the best at 1 s
  w.start(11);                       // a new run: no best, a new clock
  EXPECT_FALSE(w.observe(15, 0.5));
  // Improving by 1 % every 9 s: never 10 s without progress.
  for (int k = 1; k <= 20; ++k) EXPECT_FALSE(w.observe(15 + 9.0 * k, 0.5 * (1 + 0.01 * k)));
  EXPECT_DOUBLE_EQ(w.best(), 0.5 * 1.2);
  // Negative returns: the gain is relative to |best|.
  w.start(0);
  EXPECT_FALSE(w.observe(0, -2.0));
  EXPECT_FALSE(w.observe(20, -1.9));  // +5 %: progress
  EXPECT_TRUE(w.observe(30, -1.899));
  StallWatch off(0);
  off.start(0);
  EXPECT_FALSE(off.observe(0, 1.0));
  EXPECT_FALSE(off.observe(1e6, 1.0));
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
  EXPECT_EQ(agent.progress_calls, 2);
  EXPECT_EQ(agent.version, 2);  // no checkpoint: nothing to load back
  auto random = make_agent("random", s.envs.spec(), 0);
  calls = 0;
  EXPECT_FALSE(trainer.run(*random, s.envs, 100, [&](const TrainerUpdate&) { return ++calls; }));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace shardgym
