// `replan` (agents/replan.cpp): the re-planner that knows only the present. It acts the same
// before an event as on an episode without it (it cannot know the event is coming), reacts
// once the event is observable, and on a straggler with data shares gains over the best static
// plan in hindsight while staying below the dynamic oracle.
#include <gtest/gtest.h>

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "env/registry.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

ExperimentSpec spec(std::vector<ScenarioEvent> events) {
  ExperimentSpec s = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/2);
  s.model.global_batch = 16;
  s.model.hidden = 1024;  // compute-bound enough for a straggler to matter
  s.model.heads = 16;
  s.model.seq = 512;
  s.cluster.links[1].bandwidth = 25e9;
  s.initial_plan = "uniform:tp1d(t=2)";
  s.data_share_groups = 4;
  s.steps_per_episode = 12;
  s.scenario.events = std::move(events);
  s.scenario.restart = {5.0, 1e9, 10};
  return s;
}

std::vector<std::string> plans_of(const ExperimentSpec& s, uint64_t seed,
                                  const std::string& agent_id = "replan") {
  std::unique_ptr<Env> env = make_env(s.env_id, s);
  std::unique_ptr<Agent> agent = make_agent(agent_id, env->spec(), seed);
  std::vector<std::string> plans;
  EpisodeHooks hooks;
  hooks.on_step = [&](const StepResult& r, const EpisodeSummary&) {
    plans.push_back(r.info.plan.to_string());
  };
  run_episode(*env, *agent, seed, /*learn=*/false, hooks);
  return plans;
}

// Rank 1 at a third of its speed from scenario step 6. The reset runs scenario step 0, so
// env step t runs scenario step t + 1, and the observation before env step 5 is the first to
// show the straggler (the run's context is that of the step about to run). Up to env step 4
// the straggler run and the quiet run are the same episode to anyone who knows only what the
// observations show: replan's plans must be the same. A replanner that read the scenario
// would move early.
TEST(Replan, NeverActsOnAnEventBeforeItIsObservable) {
  const std::vector<ScenarioEvent> slow = {{6, EventKind::kStraggler, "", 1, 3.0, 0}};
  const auto quiet = plans_of(spec({}), 0);
  const auto straggler = plans_of(spec(slow), 0);
  ASSERT_EQ(quiet.size(), 12u);
  ASSERT_EQ(straggler.size(), 12u);
  for (int t = 0; t < 5; ++t) EXPECT_EQ(straggler[t], quiet[t]) << "env step " << t;
  bool moved = false;
  for (int t = 5; t < 12; ++t) moved = moved || straggler[t] != quiet[t];
  EXPECT_TRUE(moved) << "replan did not react to the straggler: " << straggler.back();
  // The check tells a planner that knows the future: hindsight-static picks its one plan for
  // the whole episode, straggler included, from the first step.
  const auto oracle_quiet = plans_of(spec({}), 0, "hindsight-static");
  const auto oracle_straggler = plans_of(spec(slow), 0, "hindsight-static");
  bool early = false;
  for (int t = 0; t < 5; ++t) early = early || oracle_quiet[t] != oracle_straggler[t];
  EXPECT_TRUE(early) << "hindsight-static, which knows the future, acted the same before it";
}

TEST(Replan, SitsBetweenHindsightStaticAndTheDynamicOracleUnderAStraggler) {
  // Rank 1 at a third of its speed for steps 4-9 of 12.
  const std::vector<ScenarioEvent> events = {{4, EventKind::kStraggler, "", 1, 3.0, 0},
                                             {10, EventKind::kStraggler, "", 1, 1.0, 0}};
  const CompareResult r =
      compare(spec(events), {"hindsight-static", "replan", "dynamic-oracle"}, {0});
  double tp[3] = {0, 0, 0};
  for (const AgentComparison& c : r.agents) {
    ASSERT_EQ(c.not_run, "") << c.agent;
    const int k = c.agent == "hindsight-static" ? 0 : c.agent == "replan" ? 1 : 2;
    tp[k] = c.episodes.at(0).throughput;
  }
  EXPECT_GT(tp[1], tp[0]) << "replan gains nothing over the best static plan in hindsight";
  EXPECT_LE(tp[1], tp[2] * (1 + 1e-3)) << "replan above the dynamic oracle";
}

}  // namespace
}  // namespace shardgym
