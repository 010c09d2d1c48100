// bench learn with PPO's restart on stall: restarts are recorded, and the checkpoint kept is
// the best evaluation across every run, not the last run's.
#include "experiments/bench_learning.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "env/registry.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

ExperimentSpec tiny_sim() {
  ExperimentSpec s = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/1);
  s.env_id = "shardgym/TPSim-v0";
  s.steps_per_episode = 8;
  return s;
}

LearnBenchOptions options(const std::string& agent, const std::string& save) {
  LearnBenchOptions o;
  o.agent_id = agent;
  o.envs = 2;
  o.threads = 1;
  o.max_steps = 2 * 8 * 12;  // 12 updates of rollout 8 on 2 envs
  o.threshold = 100;         // out of reach: every update runs
  o.seed = 3;
  o.save_path = save;
  return o;
}

TEST(BenchLearningTest, KeepsTheBestEvaluationAcrossRestarts) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "bench learn trains ppo, which needs LibTorch";
#endif
  const ExperimentSpec spec = tiny_sim();
  const std::string save =
      (std::filesystem::temp_directory_path() / "bench_learning_restart_test.ckpt").string();
  // restart_s tiny: every evaluation that does not improve on its run's best restarts.
  // keep=0, decode=mode: the greedy plan moves from the start, so evaluations differ.
  const std::string id = "ppo(rollout=8,hidden=8,keep=0,decode=mode,restart_s=1e-9)";
  std::vector<std::string> lines;
  LearnBenchOptions o = options(id, save);
  o.on_line = [&](const std::string& line) { lines.push_back(line); };
  const LearnBenchResult r = bench_learning(spec, o);
  ASSERT_EQ(r.points.size(), 12u);
  ASSERT_GE(r.restart_wall_s.size(), 1u);
  EXPECT_TRUE(std::is_sorted(r.restart_wall_s.begin(), r.restart_wall_s.end()));
  EXPECT_LE(r.restart_wall_s.back(), r.wall_s);
  // Each restart is announced once, in order, as the progress line after it.
  std::vector<std::string> announced;
  for (const std::string& line : lines)
    if (line.rfind("restart ", 0) == 0) announced.push_back(line);
  ASSERT_EQ(announced.size(), r.restart_wall_s.size());
  EXPECT_EQ(announced.front().rfind("restart 1 at ", 0), 0u) << announced.front();
  EXPECT_NE(announced.front().find("after 1e-09 s without improvement"), std::string::npos)
      << announced.front();
  const LearnBenchPoint* best = r.best();
  ASSERT_NE(best, nullptr);
  // The best evaluation came from a run that a restart replaced (this seed's curve), so the
  // checkpoint below is not simply the last network.
  EXPECT_LT(best->wall_s, r.restart_wall_s.back());
  EXPECT_LT(r.points.back().eval_return, best->eval_return);
  // The saved checkpoint is that policy: evaluated again on the evaluation seed it returns
  // the best evaluation exactly.
  std::unique_ptr<Env> env = make_env(spec.env_id, spec);
  std::unique_ptr<Agent> agent = make_agent(id, env->spec(), 99);
  agent->load(save);
  EXPECT_EQ(run_episode(*env, *agent, o.eval_seed, /*learn=*/false).total_reward,
            best->eval_return);
  std::filesystem::remove(save);
  const std::string text = learn_bench_to_text(r), json = learn_bench_to_json(r);
  EXPECT_NE(text.find("restarts on stall: " + std::to_string(r.restart_wall_s.size())),
            std::string::npos)
      << text;
  EXPECT_NE(json.find("\"restarts\": " + std::to_string(r.restart_wall_s.size())),
            std::string::npos)
      << json;

  // restart_s = 0 (the default): no restarts, and none reported.
  const LearnBenchResult off = bench_learning(spec, options("ppo(rollout=8,hidden=8)", ""));
  EXPECT_TRUE(off.restart_wall_s.empty());
  EXPECT_EQ(learn_bench_to_text(off).find("restarts"), std::string::npos);
  EXPECT_NE(learn_bench_to_json(off).find("\"restarts\": 0"), std::string::npos);
}

// Every env step the learner causes is counted, wherever it happens: PPO's polish plays whole
// episodes on a training env outside its rollouts, and those steps are in env_steps.
TEST(BenchLearningTest, CountsSearchAndEvaluationSteps) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "bench learn trains ppo, which needs LibTorch";
#endif
  const ExperimentSpec spec = tiny_sim();
  auto check = [&](const std::string& id, bool searches) {
    LearnBenchOptions o = options(id, "");
    o.max_steps = 2 * 8 * 4;  // 4 updates
    const LearnBenchResult r = bench_learning(spec, o);
    ASSERT_EQ(r.points.size(), 4u) << id;
    for (size_t i = 0; i < r.points.size(); ++i) {
      const LearnBenchPoint& p = r.points[i];
      EXPECT_EQ(p.training_steps, int64_t(16) * (i + 1)) << id;
      // One greedy evaluation episode of 8 steps after every update.
      EXPECT_EQ(p.eval_steps, int64_t(8) * (i + 1)) << id;
      EXPECT_EQ(p.env_steps, p.training_steps + p.search_steps + p.eval_steps) << id;
    }
    if (searches)
      EXPECT_GT(r.points.back().search_steps, 0) << id;
    else
      EXPECT_EQ(r.points.back().search_steps, 0) << id;
    // The evaluation seed is no training env's: learners draw theirs below 2^30.
    EXPECT_GE(o.eval_seed, kHeldOutSeedBase);
  };
  check("ppo(rollout=8,hidden=8)", false);
  check("ppo(rollout=8,hidden=8,polish=1)", true);
}

}  // namespace
}  // namespace shardgym
