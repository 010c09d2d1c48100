#include "agents/oracle.h"

#include <algorithm>
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
  for (auto* table : {&p.cost, &p.mem, &p.pair_cost, &p.pair_mem}) table->resize(blocks);
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

// Two nodes of 2 GPUs for 20 steps: the inter-node link collapses halfway, which changes the
// best plan. Reset from seed 0.
std::unique_ptr<Env> link_drop_env() {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/2, /*nodes=*/2);
  spec.steps_per_episode = 20;
  test_specs::add_link_drop(spec, 10, "nvlink", 0.02);
  auto env = agent_tests::sim_env(spec);
  env->reset(0);
  return env;
}

TEST(DynamicOracle, AdaptsToALinkDropAndBeatsTheStaticOptimum) {
  auto env = link_drop_env();
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

// The best static plan in hindsight, against every plan of the catalog kept for the whole
// episode: the least total time over the episode's steps (a link collapses halfway), found by
// walking the run step by step, not by the phase decomposition the oracle uses.
TEST(HindsightStatic, EqualsBruteForceOverAnEpisodeWithALinkDrop) {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/2, /*nodes=*/2);
  spec.catalog.with_sp = false;
  spec.catalog.with_2d = false;
  spec.catalog.chunks = {1};
  spec.steps_per_episode = 20;
  test_specs::add_link_drop(spec, 10, "nvlink", 0.02);
  auto env = agent_tests::sim_env(spec);
  env->reset(0);
  const TrainingRun& run = env->run();
  const StrategyCatalog& cat = run.catalog();
  const int blocks = run.model().num_blocks();

  // Every plan's total time over the 20 steps (+inf if it does not fit at some step).
  std::vector<Plan> plans;
  std::vector<int> idx(blocks, 0);
  while (true) {
    Plan p = run.plan();
    for (int b = 0; b < blocks; ++b) p.blocks[b] = cat.at(idx[b]);
    plans.push_back(p);
    int b = blocks - 1;
    while (b >= 0 && ++idx[b] == cat.size()) idx[b--] = 0;
    if (b < 0) break;
  }
  std::vector<double> time(plans.size(), 0.0);
  std::unique_ptr<TrainingRun> walk = run.clone();
  for (int t = 0; t < 20; ++t) {
    for (size_t i = 0; i < plans.size(); ++i) {
      const auto m = walk->estimate(plans[i]);
      time[i] += m && m->ok && !m->oom ? m->step_latency_s
                                        : std::numeric_limits<double>::infinity();
    }
    walk->step(walk->plan());
  }
  ASSERT_EQ(plans.size(), 1296u);  // 6 entries, 4 blocks
  const size_t best = std::min_element(time.begin(), time.end()) - time.begin();
  ASSERT_TRUE(std::isfinite(time[best]));

  const HindsightResult h = hindsight_static(run, RewardSpec{}, 20);
  EXPECT_EQ(h.phases, 2);
  const size_t chosen = std::find(plans.begin(), plans.end(), h.plan) - plans.begin();
  ASSERT_LT(chosen, plans.size()) << h.plan.to_string();
  EXPECT_NEAR(time[chosen], time[best], 1e-9 * time[best])
      << "hindsight " << h.plan.to_string() << " vs brute force " << plans[best].to_string();
  // No worse than the static oracle planned for the conditions at step 0.
  const OracleResult at_start = static_oracle(run, objective_for(run, RewardSpec{}));
  const size_t start = std::find(plans.begin(), plans.end(), at_start.plan) - plans.begin();
  ASSERT_LT(start, plans.size());
  EXPECT_LE(time[chosen], time[start] * (1 + 1e-12));
  // The link drop makes them differ here (dp at the start, tp1d(t=2) over the episode).
  EXPECT_LT(time[chosen], time[start]);
}

// Without events the episode has one phase, and the best plan in hindsight is the static
// oracle's (same cost; the plans may differ only by ties).
TEST(HindsightStatic, OnePhaseEqualsTheStaticOracle) {
  ExperimentSpec spec = four_layer_spec(0);
  SimRun run(spec);
  const PlanObjective obj = objective_for(run, RewardSpec{});
  const HindsightResult h = hindsight_static(run, RewardSpec{}, 5);
  EXPECT_EQ(h.phases, 1);
  EXPECT_NEAR(obj.cost_of(run, h.plan), static_oracle(run, obj).cost, 1e-9);
}

// A batch ramp (2 → 3 → 4 → 6 sequences every 3 steps) on one node of 4: tokens per step
// change, and a plan whose chunks do not divide one phase's local batch is valid in the next.
ExperimentSpec batch_ramp_spec() {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/1);
  spec.model.micro_batch = 1;
  spec.model.global_batch = 2;
  spec.catalog.chunks = {1, 2};
  spec.steps_per_episode = 12;
  for (const auto& [step, batch] : {std::pair{3, 3}, {6, 4}, {9, 6}}) {
    ScenarioEvent e;
    e.step = step;
    e.kind = EventKind::kBatch;
    e.value = batch;
    test_specs::add_event(spec, e);
  }
  return spec;
}

// The phase oracle runs each phase's static optimum from that phase's first step.
// The global batch grows (a batch ramp): a plan whose chunks do not divide the local batch of
// one phase is valid in the next. The dynamic oracle must still be able to choose it there,
// so its schedule is never dearer than following each phase's own optimum from the phase's
// start (the phase oracle), walked step by step with every move charged.
TEST(DynamicOracle, ReachesPlansValidOnlyFromTheirPhaseOn) {
  const ExperimentSpec spec = batch_ramp_spec();
  auto env = agent_tests::sim_env(spec);
  env->reset(0);
  TrainingRun& run = env->run();
  const PlanObjective obj = objective_for(*env);
  auto walked = [&](const DynamicSchedule& s) {
    std::unique_ptr<TrainingRun> walk = run.clone();
    double total = 0;
    for (const auto& seg : s.segments)
      for (int i = 0; i < seg.steps; ++i) {
        total += obj.cost(*walk->estimate(seg.plan), /*with_repartition=*/true);
        walk->step(seg.plan);
      }
    return total;
  };
  const DynamicSchedule dyn = dynamic_oracle(run, obj, 12);
  const DynamicSchedule phases = phase_oracle(run, obj, 12);
  ASSERT_EQ(phases.segments.size(), 4u);
  // The phases' optima differ (else the case tests nothing), and one of them is not valid in
  // the phase before its own.
  bool invalid_before = false;
  const std::vector<EpisodePhase> eps = episode_phases(run, 12);
  for (size_t k = 1; k < eps.size(); ++k)
    invalid_before = invalid_before || !std::isfinite(obj.cost_of(*eps[k - 1].start,
                                                                  phases.segments[k].plan));
  EXPECT_TRUE(invalid_before);
  const double phase_total = walked(phases);
  ASSERT_TRUE(std::isfinite(phase_total));
  EXPECT_LE(dyn.total_cost, phase_total * (1 + 1e-9));
  EXPECT_NEAR(walked(dyn), dyn.total_cost, 1e-9 * dyn.total_cost);
}

// With tokens per step changing (the ramp), the schedule for the episode's time and the one
// for the env's return can differ; each must be at least as good as the other on its own
// measure, walked step by step with every move charged, and the time schedule's own total
// must be its walked time. The best static plan in hindsight (which minimises time) must not
// beat the time schedule on time: the dynamic oracle bounds the throughput columns.
TEST(DynamicOracle, TimeScheduleBoundsThroughputWhereTokensPerStepChange) {
  auto env = agent_tests::sim_env(batch_ramp_spec());
  env->reset(0);
  TrainingRun& run = env->run();
  const PlanObjective per_token = objective_for(*env);
  PlanObjective per_step = per_token;
  per_step.per_token = false;
  struct Walked {
    double seconds = 0, per_token = 0, per_step = 0;
  };
  auto walk = [&](const std::vector<std::pair<Plan, int>>& segments) {
    std::unique_ptr<TrainingRun> w = run.clone();
    Walked out;
    for (const auto& [plan, steps] : segments)
      for (int i = 0; i < steps; ++i) {
        const Measurement m = *w->estimate(plan);
        out.seconds += m.step_latency_s + m.repartition_s;
        out.per_token += per_token.cost(m, true);
        out.per_step += per_step.cost(m, true);
        w->step(plan);
      }
    return out;
  };
  auto segments = [](const DynamicSchedule& d) {
    std::vector<std::pair<Plan, int>> out;
    for (const auto& s : d.segments) out.emplace_back(s.plan, s.steps);
    return out;
  };
  const DynamicSchedule by_time = dynamic_oracle(run, per_step, 12);
  const DynamicSchedule by_return = dynamic_oracle(run, per_token, 12);
  const Walked t = walk(segments(by_time)), r = walk(segments(by_return));
  ASSERT_TRUE(std::isfinite(t.seconds) && std::isfinite(r.seconds));
  EXPECT_NEAR(t.per_step, by_time.total_cost, 1e-9 * t.per_step);
  EXPECT_NEAR(t.per_step, 1e6 * t.seconds, 1e-9 * t.per_step);  // latency weight 1
  EXPECT_LE(t.seconds, r.seconds * (1 + 1e-9));
  EXPECT_LE(r.per_token, t.per_token * (1 + 1e-9));
  const Plan hs = hindsight_static(run, per_token.weights, 12).plan;
  EXPECT_LE(t.seconds, walk({{hs, 12}}).seconds * (1 + 1e-9));
}

TEST(PhaseOracle, FollowsEachPhasesOptimum) {
  auto env = link_drop_env();
  const PlanObjective obj = objective_for(*env);
  const DynamicSchedule s = phase_oracle(env->run(), obj, 20);
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(s.segments[0].first_step, 0);
  EXPECT_EQ(s.segments[1].first_step + s.segments[1].steps, 20);
  for (const auto& phase : episode_phases(env->run(), 20)) {
    const OracleSegment& seg = phase.first == 0 ? s.segments[0] : s.segments[1];
    EXPECT_NEAR(obj.cost_of(*phase.start, seg.plan),
                static_oracle(*phase.start, objective_for(*phase.start, obj.weights)).cost,
                1e-9 * seg.step_cost);
  }
}

}  // namespace
}  // namespace shardgym
