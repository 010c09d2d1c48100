// Agents with pipelines: Megatron's and ATP's pipeline rule (the fewest stages that fit), and
// every built-in agent on an env whose action has the pipeline component.
#include <gtest/gtest.h>

#include <algorithm>

#include "agents/baselines.h"
#include "agents/evaluate.h"
#include "agents/oracle.h"
#include "agents/share_search.h"
#include "env/pipeline_action.h"
#include "runtime/sim/sim_run.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

using agent_tests::Rollout;
using agent_tests::rollout;
using agent_tests::sim_env;

double peak(const TrainingRun& run, const Plan& plan) {
  const auto m = run.estimate(plan);
  EXPECT_TRUE(m && m->ok) << plan.to_string();
  return *std::max_element(m->peak_memory_bytes.begin(), m->peak_memory_bytes.end());
}

// 8 layers on 2 nodes of 4 GPUs: Megatron's t = 4 within a node, so a second stage halves
// each rank's layers (on one node of 4 it would halve t instead, and save no memory).
ExperimentSpec eight_layers() {
  ExperimentSpec s = test_specs::tiny(/*layers=*/8, /*gpus_per_node=*/4, /*nodes=*/2);
  s.model.global_batch = 16;
  s.steps_per_episode = 8;
  return s;
}

// Device memory just below what every one-stage Megatron / ATP plan needs.
double below_one_stage(const ExperimentSpec& spec) {
  SimRun run(spec);
  double need = std::min(peak(run, megatron_plan(spec.model, spec.cluster, false)),
                         peak(run, megatron_plan(spec.model, spec.cluster, true)));
  for (const AtpCandidate& c : atp_search(run, spec.reward).candidates)
    need = std::min(need, peak(run, Plan::uniform(c.strategy, spec.model.num_blocks())));
  return 0.98 * need;
}

TEST(PipelineBaselines, PipelineOnlyWhenOneStageDoesNotFit) {
  ExperimentSpec spec = eight_layers();
  spec.catalog.max_pipeline_stages = 4;
  {  // Fits with one stage: exactly the plans of before pipelines.
    SimRun run(spec);
    EXPECT_EQ(resolve_static_plan("megatron", run, spec.reward, 4),
              resolve_plan("megatron", spec.model, spec.cluster));
    EXPECT_EQ(resolve_static_plan("atp", run, spec.reward, 4), atp_search(run, spec.reward).plan);
  }
  spec.cluster.devices[0].memory_bytes = below_one_stage(spec);
  SimRun run(spec);
  for (const std::string text : {"megatron", "megatron-sp", "atp"}) {
    const Plan p = resolve_static_plan(text, run, spec.reward, 4);
    EXPECT_GT(p.stages(), 1) << text;
    EXPECT_EQ(8 % p.stages(), 0) << text;
    EXPECT_EQ(p.pipeline.schedule, Schedule::k1F1B);
    EXPECT_TRUE(p.pipeline.split.empty()) << "even split";
    EXPECT_TRUE(plan_fits(run, p)) << text << ": " << p.to_string();
    // The fewest stages: with one stage less nothing fits (ATP then says so, as before
    // pipelines; Megatron keeps its plan, which runs out of memory).
    const int fewer = p.stages() - 1;
    if (text == "atp") {
      EXPECT_THROW(resolve_static_plan(text, run, spec.reward, fewer, fewer), std::runtime_error);
      EXPECT_THROW(resolve_static_plan(text, run, spec.reward), std::runtime_error);
    } else {
      EXPECT_FALSE(plan_fits(run, resolve_static_plan(text, run, spec.reward, fewer, fewer)));
      EXPECT_EQ(resolve_static_plan(text, run, spec.reward),
                resolve_plan(text, spec.model, spec.cluster));
    }
  }
  // Megatron's micro-batches: G / (micro_batch · DP) with DP = stage world / t.
  const Plan m = resolve_static_plan("megatron", run, spec.reward, 4);
  const int dp = 8 / m.stages() / m.blocks[0].degree();
  EXPECT_EQ(m.pipeline.micro_batches, 16 / (2 * dp));
  // The initial plan "megatron" follows the rule: the env gets the pipeline component.
  spec.initial_plan = "megatron";
  auto env = sim_env(spec);
  EXPECT_EQ(env->spec().pipeline_stages, m.stages());
  env->reset(0);
  EXPECT_EQ(env->run().plan(), m);
}

// Every built-in agent acts within the mask on a pipelined env; none fails a step.
TEST(PipelineAgents, BuiltinAgentsStepAPipelinedEnv) {
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  spec.steps_per_episode = 10;
  auto env = sim_env(spec);
  ASSERT_EQ(env->spec().action_space.nvec.size(), 17u);
  for (const std::string id : {"random", "megatron", "megatron-sp", "atp", "dp", "static",
                               "random-search", "greedy", "anneal", "oracle", "dynamic-oracle"}) {
    auto agent = make_agent(id, env->spec(), 3);
    Rollout r = rollout(*env, *agent, 0, 2, /*learn=*/true);
    EXPECT_EQ(r.invalid, 0) << id;
    EXPECT_EQ(r.failed, 0) << id;
    ASSERT_FALSE(r.actions.empty()) << id;
    for (const Action& a : r.actions) ASSERT_EQ(a.size(), 17u) << id;
  }
}

TEST(PipelineAgents, StaticAgentMovesTheBoundariesToItsSplit) {
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  spec.initial_plan = "uniform:tp1d(t=2)@pp(p=2,m=4,split=2/6)";
  auto env = sim_env(spec);
  auto agent = make_agent("megatron", env->spec(), 0);
  Rollout r = rollout(*env, *agent, 0, 1, false);
  ASSERT_GE(r.actions.size(), 3u);
  EXPECT_EQ(r.invalid, 0);
  // Boundary 0 one layer later per step: 2/6 → 3/5 → 4/4, then kept.
  EXPECT_EQ(r.actions[0].back(), 2);
  EXPECT_EQ(r.actions[1].back(), 2);
  EXPECT_EQ(r.actions[2].back(), 0);
  EXPECT_EQ(env->run().plan().pipeline.layers_per_stage(8), (std::vector<int>{4, 4}));
}

// Uneven stages (oracle.h, "Pipelines"): with stage 0's ranks at a third of their speed from
// step 3, hindsight-static gives stage 0 fewer layers than the even split, its walked cost is
// below that of the best plan on the even split, and in the env the dynamic oracle, which
// reaches a split one boundary move per step as the env does, is at least as fast.
TEST(PipelineOracles, HindsightStaticUnevensTheStagesAndTheDynamicOracleStaysAbove) {
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  spec.steps_per_episode = 12;
  for (int r = 0; r < 2; ++r) {  // stage 0: ranks 0-1 of 4
    ScenarioEvent e;
    e.step = 3;
    e.kind = EventKind::kStraggler;
    e.rank = r;
    e.factor = 3.0;
    test_specs::add_event(spec, e);
  }
  SimRun run(spec);
  run.reset(0, resolve_plan(spec.initial_plan, spec.model, spec.cluster));
  OracleOptions split;
  split.search_split = true;
  const HindsightResult h = hindsight_static(run, spec.reward, spec.steps_per_episode, split);
  const HindsightResult even = hindsight_static(run, spec.reward, spec.steps_per_episode, {});
  EXPECT_EQ(even.plan.pipeline.layers_per_stage(8), (std::vector<int>{4, 4}));
  ASSERT_EQ(h.plan.stages(), 2) << h.plan.to_string();
  EXPECT_LT(h.plan.pipeline.layers_per_stage(8)[0], 4) << h.plan.to_string();
  EXPECT_LT(walked_cost(run, h.plan, spec.steps_per_episode, spec.reward),
            walked_cost(run, even.plan, spec.steps_per_episode, spec.reward));
  const CompareResult r = compare(spec, {"hindsight-static", "dynamic-oracle", "megatron"}, {0, 1});
  auto throughput = [&](const std::string& agent, size_t seed) {
    for (const AgentComparison& c : r.agents)
      if (c.agent == agent) return c.episodes.at(seed).throughput;
    ADD_FAILURE() << agent;
    return 0.0;
  };
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GE(throughput("dynamic-oracle", i), throughput("hindsight-static", i) * (1 - 1e-3))
        << "seed " << i;
    EXPECT_GT(throughput("hindsight-static", i), throughput("megatron", i)) << "seed " << i;
  }
}

}  // namespace
}  // namespace shardgym
