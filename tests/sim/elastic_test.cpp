// Uneven data shares, excluded ranks and lost ranks in the simulator (sim_run.h, "Uneven data
// shares and lost ranks"; core/data_shares.h; core/scenario.h RestartModel).
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/sim/sim_run.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

// 2 nodes × 4 H100, 16 sequences per iteration; stragglers and losses as the test sets them.
ExperimentSpec spec(std::vector<ScenarioEvent> events = {}) {
  ModelSpec m = testing::gpt(4, 1024, 16, 512, 1);
  m.global_batch = 16;
  ExperimentSpec s = testing::experiment(m, testing::cluster(2, 4, testing::h100_sxm(),
                                                             testing::nvswitch()));
  s.initial_plan = "uniform:tp1d(t=2)";
  s.scenario.events = std::move(events);
  s.scenario.restart = {60.0, 2e9, 10};
  return s;
}

Plan plan(const SimRun& run, const std::string& text) {
  return Plan::parse(text, run.model().num_blocks());
}

TEST(Elastic, UnevenSharesBeatEvenOnesUnderAStraggler) {
  // Rank 1 (share group 0 of 4 groups of 2 ranks) at half speed from step 0.
  SimRun run(spec({{0, EventKind::kStraggler, "", 1, 2.0, 0}}));
  const double even = run.estimate(plan(run, "uniform:tp1d(t=2)"))->step_latency_s;
  const double uneven = run.estimate(plan(run, "uniform:tp1d(t=2)@dp(w=2/5/5/4)"))->step_latency_s;
  EXPECT_LT(uneven, 0.9 * even) << "even " << even << " s, uneven " << uneven << " s";
  // Compute is most of this step: a group at half speed with half the sequences and the
  // others at 5/4 cut the compute time by 3/8. Without a straggler the same uneven split is
  // slower than the even one.
  SimRun calm(spec());
  EXPECT_GT(calm.estimate(plan(calm, "uniform:tp1d(t=2)@dp(w=2/5/5/4)"))->step_latency_s,
            calm.estimate(plan(calm, "uniform:tp1d(t=2)"))->step_latency_s);
}

TEST(Elastic, AnExcludedGroupHoldsNoStateAndTheRestHoldMore) {
  SimRun run(spec());
  const Measurement even = *run.estimate(plan(run, "uniform:tp1d(t=2)"));
  const Measurement out = *run.estimate(plan(run, "uniform:tp1d(t=2)@dp(w=0/6/5/5)"));
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_EQ(out.peak_memory_bytes.size(), 8u);
  EXPECT_EQ(out.peak_memory_bytes[0], 0.0);
  EXPECT_EQ(out.peak_memory_bytes[1], 0.0);
  for (int r = 2; r < 8; ++r) EXPECT_GT(out.peak_memory_bytes[r], even.peak_memory_bytes[r]) << r;
  EXPECT_GT(out.step_latency_s, even.step_latency_s);  // 6 of 16 sequences on one group
}

TEST(Elastic, MasksRefuseDegreesThatSpanShareGroups) {
  SimRun run(spec());
  run.reset(0, plan(run, "uniform:tp1d(t=2)@dp(w=4/4/4/4)"));
  const StrategyCatalog& cat = run.catalog();
  const std::vector<uint8_t> mask = run.action_mask(0);
  bool some = false;
  for (int k = 0; k < cat.size(); ++k) {
    if (cat.at(k).degree() > 2) {
      EXPECT_EQ(mask[k], 0) << cat.at(k).to_string();
    }
    some = some || (cat.at(k).degree() > 2 && cat.shape_mask(BlockKind::kAttention)[k]);
  }
  EXPECT_TRUE(some) << "the catalog has no degree above 2 to refuse";
  const Measurement m = run.step(plan(run, "uniform:tp1d(t=4)@dp(w=4/4/4/4)"));
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("data-share group"), std::string::npos) << m.error;
}

TEST(Elastic, ALostRankCostsARestartOnlyToPlansThatUseIt) {
  // Rank 5 (node 1, share group 2) lost at step 2, back at step 6.
  SimRun run(spec({{2, EventKind::kRankLoss, "", 5, 1, 0}, {6, EventKind::kRankJoin, "", 5, 1, 0}}));
  const Plan full = plan(run, "uniform:tp1d(t=2)");
  const Plan without = plan(run, "uniform:tp1d(t=2)@dp(w=6/5/0/5)");
  const Plan without_other = plan(run, "uniform:tp1d(t=2)@dp(w=6/5/5/0)");
  run.reset(0, full);
  run.step(full);
  const Measurement before = run.step(full);  // step 1: nothing lost yet
  EXPECT_LT(before.repartition_s, 1.0);
  // Step 2: the loss. The full plan restarts (60 s + reload + 5 steps of rollback); a plan
  // without the lost rank's group does not, and neither is the other group's exclusion spared.
  EXPECT_GT(run.estimate(full)->repartition_s, 60.0);
  EXPECT_LT(run.estimate(without)->repartition_s, 1.0);
  EXPECT_GT(run.estimate(without_other)->repartition_s, 60.0);
  const RunContext ctx = run.context();
  ASSERT_EQ(ctx.rank_alive.size(), 8u);
  EXPECT_EQ(ctx.rank_alive[5], 0);
  EXPECT_EQ(std::count(ctx.rank_alive.begin(), ctx.rank_alive.end(), 0), 1);
  const Measurement restart = run.step(full);
  EXPECT_GT(restart.repartition_s, 60.0);
  EXPECT_NEAR(restart.repartition_s - 60.0, 5 * restart.step_latency_s +
                                                *std::max_element(restart.peak_memory_bytes.begin(),
                                                                  restart.peak_memory_bytes.end()) /
                                                    2e9,
              1e-9);
  // A spare stands in from then on: no second restart, and the rank counts as alive.
  EXPECT_LT(run.step(full).repartition_s, 1.0);
  EXPECT_EQ(run.context().rank_alive[5], 1);
}

TEST(Elastic, RejoiningGroupReceivesItsState) {
  SimRun run(spec({{1, EventKind::kRankLoss, "", 5, 1, 0}, {3, EventKind::kRankJoin, "", 5, 1, 0}}));
  const Plan without = plan(run, "uniform:tp1d(t=2)@dp(w=6/5/0/5)");
  run.reset(0, without);
  for (int i = 0; i < 3; ++i) EXPECT_LT(run.step(without).repartition_s, 1.0);
  const Measurement back = run.step(plan(run, "uniform:tp1d(t=2)"));
  EXPECT_GT(back.repartition_bytes, 0.0);
  EXPECT_GT(back.repartition_s, 0.0);
  EXPECT_LT(back.repartition_s, 10.0);  // a transfer from a replica, not a restart
}

TEST(Elastic, CloneHoldingKeepsConditionsAndHoldsThePlan) {
  SimRun run(spec({{0, EventKind::kStraggler, "", 1, 2.0, 0}}));
  const Plan uneven = plan(run, "uniform:tp1d(t=2)@dp(w=2/5/5/4)");
  std::unique_ptr<TrainingRun> held = run.clone_holding(uneven);
  EXPECT_EQ(held->plan(), uneven);
  const Measurement m = *held->estimate(uneven);
  EXPECT_EQ(m.repartition_s, 0.0);
  EXPECT_DOUBLE_EQ(m.step_latency_s, run.estimate(uneven)->step_latency_s);
  EXPECT_THROW(run.clone_holding(plan(run, "uniform:tp1d(t=4)@dp(w=4/4/4/4)")),
               std::invalid_argument);
}

// fits() gives estimate()'s verdict (ok and not out of memory) from memory alone, and the
// caches a change of shares keeps (transfers, shapes; sim_run.h transfer_gen_) give what a run
// without that history gives: every estimate of a run that priced many share choices, under
// links and speeds that change, equals a fresh run's at the same step with the same plans in
// force before.
TEST(Elastic, FitsAndCachedEstimatesAgreeWithAFreshRun) {
  const std::vector<ScenarioEvent> events = {
      {2, EventKind::kLinkBandwidth, "nvswitch", -1, 0.5, 0},
      {3, EventKind::kStraggler, "", 6, 2.0, 0},
      {5, EventKind::kLinkBandwidth, "nvswitch", -1, 1.0, 0}};
  ExperimentSpec s = spec(events);
  std::vector<std::string> texts;
  for (const char* blocks : {"uniform:dp", "uniform:tp1d(t=2)", "uniform:tp1d(t=2,sp=1)",
                             "uniform:dp(recompute=1)", "uniform:tp1d(t=4)",
                             "tp1d(t=2);dp;tp2d(d1=2,d2=1,first=row);dp(chunks=2);dp;dp;"
                             "tp1d(t=2);dp"})
    for (const char* shares : {"", "@dp(w=4/4/4/4)", "@dp(w=2/5/5/4)", "@dp(w=0/6/5/5)",
                               "@dp(w=1/0/0/1)"})
      texts.push_back(std::string(blocks) + shares);
  // A memory size between the plans' needs, so that some of them do not fit.
  std::vector<double> peaks;
  {
    SimRun probe(s);
    for (const auto& t : texts) {
      const Measurement m = *probe.estimate(plan(probe, t));
      if (m.ok) peaks.push_back(*std::max_element(m.peak_memory_bytes.begin(),
                                                  m.peak_memory_bytes.end()));
    }
  }
  ASSERT_GT(peaks.size(), 10u);
  std::sort(peaks.begin(), peaks.end());
  for (DeviceType& d : s.cluster.devices) d.memory_bytes = peaks[peaks.size() / 2];

  SimRun run(s);
  std::vector<Plan> history = {plan(run, "uniform:tp1d(t=2)")};
  run.reset(0, history[0]);
  int fit = 0, refused = 0;
  for (int step = 0; step < 7; ++step) {
    SimRun fresh(s);
    fresh.reset(0, history[0]);
    for (size_t i = 1; i < history.size(); ++i) fresh.step(history[i]);
    for (const auto& t : texts) {
      const Plan p = plan(run, t);
      const bool fits = run.fits(p);
      const Measurement a = *run.estimate(p), b = *fresh.estimate(p);
      EXPECT_EQ(fits, a.ok && !a.oom) << t << " at step " << step << ": " << a.error;
      (fits ? fit : refused) += 1;
      EXPECT_EQ(a.ok, b.ok) << t;
      EXPECT_EQ(a.step_latency_s, b.step_latency_s) << t << " at step " << step;
      EXPECT_EQ(a.repartition_s, b.repartition_s) << t << " at step " << step;
      EXPECT_EQ(a.repartition_bytes, b.repartition_bytes) << t << " at step " << step;
      EXPECT_EQ(a.energy_j, b.energy_j) << t << " at step " << step;
      EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << t << " at step " << step;
    }
    history.push_back(plan(run, texts[(7 * step + 3) % texts.size()]));
    if (!run.fits(history.back())) history.back() = history[history.size() - 2];
    run.step(history.back());
  }
  EXPECT_GT(fit, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace shardgym
