#include "agents/baselines.h"

#include <cmath>

#include <gtest/gtest.h>

#include "agents/analytic_cost.h"
#include "agents/objective.h"
#include "env/partition_env.h"
#include "env/wrappers.h"
#include "runtime/sim/sim_run.h"
#include "tests/agents/agent_test_util.h"
#include "tests/env/fake_run.h"

namespace shardgym {
namespace {

using agent_tests::Rollout;
using agent_tests::rollout;
using agent_tests::sim_env;
using agent_tests::sim_spec;

// Two nodes of four GPUs: ATP's planner has meshes to choose from.
ExperimentSpec two_node_spec() {
  ExperimentSpec s = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/2);
  s.steps_per_episode = 6;
  return s;
}

TEST(AtpSearch, PicksTheCheapestFittingUniformMesh) {
  SimRun run(two_node_spec());
  AtpResult r = atp_search(run, RewardSpec{});
  EXPECT_EQ(r.source, "estimate");
  ASSERT_FALSE(r.candidates.empty());
  bool has_2d = false, has_1d = false, both_firsts = false;
  for (const AtpCandidate& c : r.candidates) {
    has_2d = has_2d || c.strategy.kind == StrategyKind::kTP2D;
    has_1d = has_1d || c.strategy.kind == StrategyKind::kTP1D || c.strategy.d2 == 1;
    both_firsts = both_firsts || (c.strategy.kind == StrategyKind::kTP2D && !c.strategy.row_first);
    EXPECT_EQ(c.strategy.chunks, 1);
    EXPECT_FALSE(c.strategy.recompute);
    if (c.fits) {
      EXPECT_GE(c.cost, r.cost);
    }
  }
  EXPECT_TRUE(has_2d && has_1d && both_firsts);
  EXPECT_EQ(r.plan, Plan::uniform(r.strategy, run.model().num_blocks()));
  const PlanObjective obj = objective_for(run, RewardSpec{});
  EXPECT_DOUBLE_EQ(obj.cost_of(run, r.plan), r.cost);
}

TEST(AtpSearch, FallsBackToTheAlphaBetaModelWithoutEstimates) {
  ExperimentSpec spec = two_node_spec();
  envtest::FakeRunOptions opt;
  opt.can_estimate = false;
  envtest::FakeRun run(spec, opt);
  AtpResult r = atp_search(run, RewardSpec{});
  EXPECT_EQ(r.source, "alpha-beta");
  const AnalyticCost best = analytic_plan_cost(spec.model, spec.cluster, r.plan);
  for (const AtpCandidate& c : r.candidates) {
    if (c.fits) {
      EXPECT_GE(c.cost, best.total_s() * (1 - 1e-12));
    }
  }
}

TEST(AnalyticCost, CrossNodeGroupsCostMoreThanIntraNode) {
  ExperimentSpec spec = two_node_spec();
  const CommMatrix matrix = spec.cluster.comm_matrix();
  // tp1d(t=8) spans both nodes (slow link), tp1d(t=4) stays inside one.
  AnalyticCost wide = analytic_block_cost(spec.model, spec.cluster, matrix, 1, Strategy::tp1d(8));
  AnalyticCost narrow = analytic_block_cost(spec.model, spec.cluster, matrix, 1, Strategy::tp1d(4));
  EXPECT_GT(wide.comm_s, narrow.comm_s);
  EXPECT_LT(wide.memory_bytes, narrow.memory_bytes);
  EXPECT_THROW(analytic_plan_cost(spec.model, spec.cluster, Plan::uniform(Strategy::dp(), 3)),
               std::invalid_argument);
}

TEST(StaticAgents, ResolveTheirPlans) {
  ExperimentSpec spec = two_node_spec();
  auto env = sim_env(spec);
  const int B = env->spec().num_blocks;
  const StrategyCatalog& cat = env->run().catalog();
  struct Case {
    std::string id;
    Plan plan;
  };
  std::vector<Case> cases = {
      {"megatron", megatron_plan(spec.model, spec.cluster, false)},
      {"megatron-sp", megatron_plan(spec.model, spec.cluster, true)},
      {"dp", Plan::uniform(Strategy::dp(), B)},
      {"atp", atp_search(env->run(), spec.reward).plan},
      {"static(plan=tp2d(d1=2,d2=2,first=col))", Plan::uniform(Strategy::tp2d(2, 2, false), B)},
      {"static(plan=attn=tp1d(t=4)|mlp=tp2d(d1=2,d2=2,first=row))",
       Plan::parse("attn=tp1d(t=4)|mlp=tp2d(d1=2,d2=2,first=row)", B)},
      {"static", megatron_plan(spec.model, spec.cluster, false)},
  };
  for (const Case& c : cases) {
    auto agent = make_agent(c.id, env->spec(), 0);
    Rollout r = rollout(*env, *agent, 1, 1, false);
    EXPECT_EQ(r.invalid, 0) << c.id;
    ASSERT_FALSE(r.actions.empty());
    for (const Action& a : r.actions) EXPECT_EQ(a, plan_to_action(c.plan, cat)) << c.id;
  }
}

TEST(StaticAgents, StaticReadsTheExperimentsAgentPlan) {
  ExperimentSpec spec = two_node_spec();
  spec.agent.plan = "dp";
  auto env = sim_env(spec);
  auto agent = make_agent("static", env->spec(), 0);
  Rollout r = rollout(*env, *agent, 0, 1, false);
  EXPECT_EQ(r.actions.front(),
            plan_to_action(Plan::uniform(Strategy::dp(), 4), env->run().catalog()));
}

TEST(StaticAgents, ErrorsSayWhatIsWrong) {
  auto env = sim_env(two_node_spec());
  env->reset(0);
  auto bad = make_agent("static(plan=tp1d(t=3))", env->spec(), 0);
  bad->begin_episode(*env);
  const ResetResult start = env->reset(0);
  const std::vector<int32_t>& plan = start.info.plan_indices;
  EXPECT_THROW(bad->act(start.obs, env->action_mask(), plan), std::invalid_argument);
  auto unbegun = make_agent("megatron", env->spec(), 0);
  EXPECT_THROW(unbegun->act(start.obs, env->action_mask(), plan), std::logic_error);
  EXPECT_THROW(make_agent("megatron(plan=dp)", env->spec(), 0), std::invalid_argument);
}

// Under a memory limit a static target may be masked while other blocks are heavy: the agent
// keeps those blocks and reaches its target over the next steps, never stepping a mask.
TEST(StaticAgents, ReachTheirTargetThroughTheMask) {
  ExperimentSpec spec = test_specs::tiny(2, 4, 1);
  spec.steps_per_episode = 5;
  spec.initial_plan = "2*dp;2*tp1d(t=4)";
  envtest::FakeRunOptions opt;
  // FakeRun: a tp1d(4) block holds 1.5e9 B, a dp block 3e9 B. Start 9e9; moving block 2 or 3
  // to dp first would need 10.5e9, so those wait until blocks 0 and 1 have moved to tp1d(4).
  opt.capacity = 9.2e9;
  auto env = std::make_unique<TimeLimit>(
      std::make_unique<PartitionEnv>("fake", std::make_unique<envtest::FakeRun>(spec, opt), spec),
      5);
  auto agent = make_agent("static(plan=2*tp1d(t=4);2*dp)", env->spec(), 0);
  Rollout r = rollout(*env, *agent, 0, 1, false);
  EXPECT_EQ(r.invalid, 0);
  const Action target = plan_to_action(Plan::parse("2*tp1d(t=4);2*dp", 4), env->run().catalog());
  EXPECT_NE(r.actions.front(), target);
  EXPECT_EQ(r.actions.back(), target);
}

}  // namespace
}  // namespace shardgym
