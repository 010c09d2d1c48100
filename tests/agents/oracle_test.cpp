#include "agents/oracle.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "agents/chain_dp.h"
#include "runtime/sim/sim_run.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

// Random chain problems: costs and memory with both signs on pairs, a budget that binds.
ChainProblem random_problem(std::mt19937_64& rng, int blocks, int options) {
  std::uniform_real_distribution<double> u(0, 1);
  ChainProblem p;
  p.candidates.resize(blocks);
  p.cost.resize(blocks);
  p.mem.resize(blocks);
  p.pair_cost.resize(blocks);
  p.pair_mem.resize(blocks);
  for (int b = 0; b < blocks; ++b) {
    const int n = 1 + static_cast<int>(u(rng) * options);
    for (int i = 0; i < n; ++i) {
      p.candidates[b].push_back(i);
      p.cost[b].push_back(u(rng) * 10);
      p.mem[b].push_back(u(rng) * 5);
    }
    if (b == 0) continue;
    for (size_t i = 0; i < p.candidates[b - 1].size() * n; ++i) {
      p.pair_cost[b].push_back(u(rng) * 4 - 2);
      p.pair_mem[b].push_back(u(rng) * 2 - 0.5);
    }
  }
  p.constant_cost = 3;
  p.constant_mem = 1;
  p.mem_budget = 1 + blocks * 2.0;  // about the mean: roughly half of all choices fit
  return p;
}

TEST(ChainDP, EqualsBruteForceOnRandomProblems) {
  std::mt19937_64 rng(7);
  int feasible = 0;
  for (int trial = 0; trial < 200; ++trial) {
    ChainProblem p = random_problem(rng, 2 + trial % 6, 4);
    ChainSolution dp = solve_chain(p);
    ChainSolution bf = brute_force_chain(p);
    ASSERT_EQ(dp.feasible, bf.feasible) << "trial " << trial;
    if (!bf.feasible) continue;
    ++feasible;
    EXPECT_TRUE(dp.exact);
    // Both sum the same doubles, in different orders: equal up to rounding.
    EXPECT_NEAR(dp.cost, bf.cost, 1e-9) << "trial " << trial;
    double mem = 0;
    EXPECT_NEAR(p.value(dp.choice, &mem), dp.cost, 1e-9);
    EXPECT_LE(mem, p.mem_budget + 1e-9);
  }
  EXPECT_GT(feasible, 100);  // the budget binds, but most problems have a solution
}

TEST(ChainDP, NoFeasibleChoice) {
  std::mt19937_64 rng(1);
  ChainProblem p = random_problem(rng, 4, 3);
  p.mem_budget = -1e9;
  EXPECT_FALSE(solve_chain(p).feasible);
  EXPECT_FALSE(brute_force_chain(p).feasible);
}

TEST(ChainDP, ThinnedFrontsSayInexact) {
  std::mt19937_64 rng(3);
  int thinned = 0;
  for (int trial = 0; trial < 30; ++trial) {
    ChainProblem p = random_problem(rng, 10, 6);
    ChainSolution full = solve_chain(p);
    ChainSolution thin = solve_chain(p, /*max_front=*/2);
    EXPECT_TRUE(full.exact);
    if (thin.exact) continue;
    ++thinned;
    if (thin.feasible) {
      EXPECT_GE(thin.cost, full.cost - 1e-9);  // a thinned front can only miss the optimum
    }
  }
  EXPECT_GT(thinned, 0);
  std::mt19937_64 rng2(1);
  EXPECT_THROW(solve_chain(random_problem(rng2, 3, 2), 1), std::invalid_argument);
}

TEST(ChainDP, RejectsInconsistentTables) {
  ChainProblem p;
  p.candidates = {{0, 1}, {0}};
  p.cost = {{1, 2}, {3}};
  p.mem = {{1, 2}, {3}};
  p.pair_cost = {{}, {0}};  // needs 2·1 entries
  p.pair_mem = {{}, {0, 0}};
  EXPECT_THROW(solve_chain(p), std::invalid_argument);
}

// A 4-layer model with a 6-entry catalog on 4 simulated GPUs, memory tight enough that the
// constraint binds: the oracle must find the same optimum as trying every one of the 6^8
// plans through estimate().
ExperimentSpec four_layer_spec(double memory_bytes) {
  ExperimentSpec s = test_specs::tiny(/*layers=*/4, /*gpus_per_node=*/4, /*nodes=*/1);
  s.catalog.with_sp = false;
  s.catalog.with_2d = false;
  s.catalog.chunks = {1};
  s.catalog.with_recompute = true;
  if (memory_bytes > 0) s.cluster.devices[0].memory_bytes = memory_bytes;
  return s;
}

struct BruteForce {
  double cost = std::numeric_limits<double>::infinity();
  Plan plan;
  int64_t fitting = 0, total = 0;
};

BruteForce brute_force(const SimRun& run, const PlanObjective& obj) {
  const StrategyCatalog& cat = run.catalog();
  const int blocks = run.model().num_blocks();
  BruteForce out;
  std::vector<int> idx(blocks, 0);
  Plan plan = Plan::uniform(cat.at(0), blocks);
  while (true) {
    for (int b = 0; b < blocks; ++b) plan.blocks[b] = cat.at(idx[b]);
    const double c = obj.cost_of(run, plan);
    ++out.total;
    if (std::isfinite(c)) {
      ++out.fitting;
      if (c < out.cost) out.cost = c, out.plan = plan;
    }
    int b = blocks - 1;
    while (b >= 0 && ++idx[b] == cat.size()) idx[b--] = 0;
    if (b < 0) break;
  }
  return out;
}

TEST(StaticOracle, EqualsBruteForceOnFourLayersWithTightMemory) {
  // Find a capacity between the lightest and the heaviest uniform plan.
  SimRun probe(four_layer_spec(0));
  ASSERT_EQ(probe.catalog().size(), 6);
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (int k = 0; k < probe.catalog().size(); ++k) {
    auto m = probe.estimate(Plan::uniform(probe.catalog().at(k), 8));
    ASSERT_TRUE(m && m->ok);
    lo = std::min(lo, m->peak_memory_bytes[0]);
    hi = std::max(hi, m->peak_memory_bytes[0]);
  }
  ASSERT_LT(lo, hi);
  for (double frac : {0.3, 0.7}) {
    SimRun run(four_layer_spec(lo + frac * (hi - lo)));
    const PlanObjective obj = objective_for(run, RewardSpec{});
    BruteForce bf = brute_force(run, obj);
    ASSERT_EQ(bf.total, 1679616);  // 6^8
    ASSERT_GT(bf.fitting, 0);
    EXPECT_LT(bf.fitting, bf.total) << "memory does not bind at " << frac;
    OracleResult o = static_oracle(run, obj);
    EXPECT_EQ(o.chosen_by, "dp");
    EXPECT_TRUE(o.exact);
    // The oracle's figure is a fresh estimate() of its plan; equal optimum up to rounding.
    EXPECT_NEAR(o.cost, bf.cost, 1e-9 * bf.cost)
        << "oracle " << o.plan.to_string() << " vs brute force " << bf.plan.to_string();
    EXPECT_NEAR(o.predicted_cost, o.cost, 1e-7 * o.cost);
    EXPECT_TRUE(std::isfinite(obj.cost_of(run, o.plan)));
    EXPECT_LT(o.estimates, 2000);  // decomposition, not enumeration
  }
}

TEST(StaticOracle, NeedsARunThatEstimates) {
  ExperimentSpec spec = four_layer_spec(0);
  SimRun run(spec);
  PlanObjective obj = objective_for(run, RewardSpec{});
  OracleResult o = static_oracle(run, obj);
  // Never worse than the plan in force or than any uniform plan.
  EXPECT_LE(o.cost, obj.cost_of(run, run.plan()) * (1 + 1e-12));
  for (int k = 0; k < run.catalog().size(); ++k)
    EXPECT_LE(o.cost, obj.cost_of(run, Plan::uniform(run.catalog().at(k), 8)) * (1 + 1e-12));
}

TEST(DynamicOracle, AdaptsToALinkDropAndBeatsTheStaticOptimum) {
  // Two nodes: the inter-node link collapses halfway, which changes the best plan.
  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/2, /*nodes=*/2);
  spec.steps_per_episode = 20;
  test_specs::add_link_drop(spec, 10, "nvlink", 0.02);
  auto env = agent_tests::sim_env(spec);
  env->reset(0);
  TrainingRun& run = env->run();
  const PlanObjective obj = objective_for(*env);
  DynamicSchedule sched = dynamic_oracle(run, obj, 20);
  ASSERT_GE(sched.segments.size(), 2u);
  int steps = 0;
  for (const auto& s : sched.segments) steps += s.steps;
  EXPECT_EQ(steps, 20);
  // Keeping the static oracle's plan all episode costs at least as much as the schedule.
  OracleResult stat = static_oracle(run, obj);
  std::unique_ptr<TrainingRun> walk = run.clone();
  double static_total = 0;
  for (int i = 0; i < 20; ++i) {
    static_total += obj.cost(*walk->estimate(stat.plan), /*with_repartition=*/true);
    walk->step(stat.plan);
  }
  EXPECT_LE(sched.total_cost, static_total * (1 + 1e-12));
  // Replaying the schedule reproduces its own total (transitions included).
  std::unique_ptr<TrainingRun> replay = run.clone();
  double replay_total = 0;
  for (const auto& seg : sched.segments)
    for (int i = 0; i < seg.steps; ++i) {
      replay_total += obj.cost(*replay->estimate(seg.plan), true);
      replay->step(seg.plan);
    }
  EXPECT_NEAR(replay_total, sched.total_cost, 1e-9 * replay_total);
}

}  // namespace
}  // namespace shardgym
