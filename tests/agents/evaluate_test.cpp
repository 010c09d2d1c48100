#include "agents/evaluate.h"

#include <gtest/gtest.h>

#include "env/wrappers.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

TEST(RunEpisode, AddsUpTheMeasurements) {
  ExperimentSpec spec = agent_tests::sim_spec(2, 8);  // a link drop at step 4
  auto env = agent_tests::sim_env(spec);
  auto agent = make_agent("megatron", env->spec(), 0);
  EpisodeSummary s = run_episode(*env, *agent, 3, false);
  EXPECT_EQ(s.steps, 8);
  EXPECT_EQ(s.seed, 3u);
  EXPECT_EQ(s.failed_steps, 0);
  EXPECT_GT(s.tokens, 0);
  EXPECT_GT(s.time_s, 0);
  EXPECT_DOUBLE_EQ(s.throughput, s.tokens / s.time_s);
  EXPECT_EQ(s.repartition_s, 0);  // megatron is the initial plan: nothing moves
  EXPECT_GT(s.peak_memory_bytes, 0);
  EXPECT_GT(s.energy_per_token_j, 0);
  EXPECT_EQ(s.final_plan, megatron_plan(spec.model, spec.cluster).to_string());
  // NormalizeReward: Megatron scores 1 per step against itself, across the link drop too.
  EXPECT_NEAR(s.total_reward, 8.0, 1e-9);
}

// Notes in `log` which env took each step.
class StepLog : public Wrapper {
 public:
  StepLog(std::unique_ptr<Env> inner, char name, std::string* log)
      : Wrapper(std::move(inner)), name_(name), log_(log) {}
  void step_into(const Action& action, StepResult& out) override {
    *log_ += name_;
    Wrapper::step_into(action, out);
  }

 private:
  char name_;
  std::string* log_;
};

// Interleaved, each episode is what it is alone (the sim is deterministic per seed), and the
// steps alternate a b, b a, ... until both episodes end.
TEST(RunInterleavedEpisodes, StepsInTurnAndSummarisesEachAsAlone) {
  ExperimentSpec spec = agent_tests::sim_spec(2, 6);
  std::string log;
  StepLog a(agent_tests::sim_env(spec), 'a', &log), b(agent_tests::sim_env(spec), 'b', &log);
  auto random_agent = make_agent("random", a.spec(), 5);
  auto megatron = make_agent("megatron", b.spec(), 5);
  const auto [sa, sb] = run_interleaved_episodes(a, *random_agent, b, *megatron, 5);
  EXPECT_EQ(log, "abbaabbaabba");
  auto alone_env = agent_tests::sim_env(spec);
  auto alone_agent = make_agent("random", alone_env->spec(), 5);
  const EpisodeSummary alone = run_episode(*alone_env, *alone_agent, 5, false);
  EXPECT_EQ(sa.steps, 6);
  EXPECT_EQ(sa.final_plan, alone.final_plan);
  EXPECT_DOUBLE_EQ(sa.total_reward, alone.total_reward);
  EXPECT_DOUBLE_EQ(sa.throughput, alone.throughput);
  EXPECT_DOUBLE_EQ(sa.repartition_s, alone.repartition_s);
  EXPECT_EQ(sb.agent, "megatron");
  EXPECT_EQ(sb.steps, 6);
  EXPECT_NEAR(sb.total_reward, 6.0, 1e-9);  // Megatron against itself
}

TEST(Compare, NormalisesToMegatron) {
  ExperimentSpec spec = agent_tests::sim_spec(2, 8);
  int calls = 0;
  CompareOptions opt;
  opt.on_episode = [&](const EpisodeSummary&) { ++calls; };
  CompareResult r = compare(spec, {"megatron", "oracle", "dynamic-oracle", "random"}, {0, 1}, opt);
  ASSERT_EQ(r.agents.size(), 4u);
  EXPECT_EQ(r.baseline, "megatron");
  EXPECT_EQ(calls, 2 + 3 * 2);  // the baseline's row reuses its episodes
  for (double x : r.agents[0].throughput_ratio) EXPECT_DOUBLE_EQ(x, 1.0);
  // The oracles plan on the noise-free cost model: never slower than Megatron over the
  // episode except for their one repartition, which this tiny model makes cheap.
  EXPECT_GE(r.agents[1].mean_throughput_ratio(), 1.0);
  EXPECT_GE(r.agents[2].mean_throughput_ratio(), r.agents[1].mean_throughput_ratio() * 0.999);
  for (const auto& a : r.agents) {
    ASSERT_EQ(a.episodes.size(), 2u);
    EXPECT_EQ(a.episodes[0].seed, 0u);
    EXPECT_EQ(a.episodes[1].seed, 1u);
    EXPECT_EQ(a.memory_ratio.size(), 2u);
  }
  EXPECT_THROW(compare(spec, {"megatron"}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
