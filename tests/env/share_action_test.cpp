// The data-share choices of the plan-level action (env/share_action.h) on the simulator:
// spaces, masks, what each choice does, and the observation's shares part.
#include "env/share_action.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/env/conformance.h"
#include "env/partition_env.h"
#include "runtime/sim/sim_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

// 2 nodes × 4 GPUs, 16 sequences per iteration, 4 share groups of 2 ranks.
ExperimentSpec spec_with_shares(std::vector<ScenarioEvent> events = {}) {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/2);
  spec.model.global_batch = 16;
  spec.model.hidden = 1024;  // compute-bound enough for a straggler to matter
  spec.model.heads = 16;
  spec.model.seq = 512;
  spec.initial_plan = "uniform:tp1d(t=2)";
  spec.data_share_groups = 4;
  spec.scenario.events = std::move(events);
  spec.scenario.restart = {60.0, 1e9, 10};
  return spec;
}

std::unique_ptr<PartitionEnv> sim_env(const ExperimentSpec& spec) {
  return std::make_unique<PartitionEnv>("shardgym/TPSim-v0", std::make_unique<SimRun>(spec),
                                        spec);
}

TEST(ShareAction, ChoicesAreCountedAndApplied) {
  EXPECT_EQ(share_choices(0), 0);
  EXPECT_EQ(share_choices(4), 18);
  EXPECT_EQ(plan_component_choices(1, 0), 0);
  EXPECT_EQ(plan_component_choices(1, 4), 19);  // keep + 18
  EXPECT_EQ(plan_component_choices(3, 4), 5 + 18);
  const std::vector<double> speeds = {0.5, 1, 1, 1};
  EXPECT_TRUE(apply_share_choice({}, 0, 4, 16, speeds).empty());  // even: no @dp part
  EXPECT_EQ(apply_share_choice({}, 1, 4, 16, speeds), (std::vector<int>{2, 5, 5, 4}));
  EXPECT_EQ(apply_share_choice({}, 0, 4, 16, {0, 1, 1, 1}), (std::vector<int>{0, 6, 5, 5}));
  // Group 2 left out.
  EXPECT_EQ(apply_share_choice({}, 4, 4, 16, speeds), (std::vector<int>{6, 5, 0, 5}));
  // Move one sequence from group 0 to group 1 (the first move).
  EXPECT_EQ(apply_share_choice({}, 6, 4, 16, speeds), (std::vector<int>{3, 5, 4, 4}));
  // From a group with none: nothing changes.
  EXPECT_EQ(apply_share_choice({0, 6, 5, 5}, 6, 4, 16, speeds), (std::vector<int>{0, 6, 5, 5}));
  EXPECT_EQ(share_choice_toward({}, {6, 5, 0, 5}, 4, 16, speeds), 4);  // one step
  // Toward a target: every choice it names brings the shares closer, and it arrives.
  std::vector<int> now;
  const std::vector<int> target = {1, 7, 4, 4};
  for (int i = 0; i < 20; ++i) {
    const int s = share_choice_toward(now, target, 4, 16, speeds);
    if (s < 0) break;
    now = apply_share_choice(now, s, 4, 16, speeds);
  }
  EXPECT_EQ(now, target);
}

TEST(ShareAction, SpacesMasksAndObservation) {
  auto env = sim_env(spec_with_shares({{0, EventKind::kStraggler, "", 1, 2.0, 0}}));
  const EnvSpec& s = env->spec();
  const int B = 4, K = s.catalog_size;
  ASSERT_EQ(s.share_groups, 4);
  ASSERT_EQ(s.action_space.nvec.size(), size_t(B + 1));
  EXPECT_EQ(s.action_space.nvec.back(), 19);
  bool named = false;
  for (const ObservationPart& p : s.observation_parts) named = named || p.name == "shares";
  EXPECT_TRUE(named);
  auto [obs, info] = env->reset(0);
  ASSERT_EQ(static_cast<int64_t>(obs.size()), s.observation_space.flat_size());
  const std::vector<uint8_t> mask = env->action_mask();
  ASSERT_EQ(mask.size(), size_t(B * K + 19));
  EXPECT_EQ(mask[B * K], 1);      // keep
  EXPECT_EQ(mask[B * K + 2], 1);  // balanced (share choice 1)
  // Balanced under rank 1's straggle: group 0 gets fewer sequences, and the step is faster.
  Action keep(info.plan_indices.begin(), info.plan_indices.end());
  keep.push_back(0);
  const double slow = env->step(keep).info.measurement.step_latency_s;
  Action balanced = keep;
  balanced.back() = 2;
  const StepResult r = env->step(balanced);
  ASSERT_TRUE(r.info.error.empty()) << r.info.error;
  EXPECT_EQ(r.info.plan.pipeline.shares, (std::vector<int>{2, 5, 5, 4}));
  const double fast = env->step(keep).info.measurement.step_latency_s;
  EXPECT_LT(fast, 0.97 * slow);  // the size of the gain: sim/elastic_test.cpp
  // The shares part: group 0's share 2 of an even 4, speed 0.5, can train.
  int64_t off = -1;
  for (const ObservationPart& p : s.observation_parts)
    if (p.name == "shares") off = p.offset;
  ASSERT_GE(off, 0);
  EXPECT_FLOAT_EQ(r.obs[off + 0], 0.5f);
  EXPECT_FLOAT_EQ(r.obs[off + 1], 0.5f);
  EXPECT_FLOAT_EQ(r.obs[off + 2], 1.0f);
  // With uneven shares in force, degrees above a group's 2 ranks are masked for every block.
  const std::vector<uint8_t> after = env->action_mask();
  const StrategyCatalog& cat = env->run().catalog();
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k)
      if (cat.at(k).degree() > 2) {
        EXPECT_EQ(after[b * K + k], 0) << b << " " << cat.at(k).to_string();
      }
}

TEST(ShareAction, ALostGroupIsExcludedByEvenAndTheRunPaysNoRestart) {
  auto env = sim_env(spec_with_shares({{1, EventKind::kRankLoss, "", 5, 1, 0}}));
  auto [obs, info] = env->reset(0);
  Action keep(info.plan_indices.begin(), info.plan_indices.end());
  keep.push_back(0);
  // The env's reset measured step 0 of the run; the loss is in force from the env's first
  // step. "even" now leaves group 2 (ranks 4, 5) out.
  Action even = keep;
  even.back() = 1;
  const StepResult r = env->step(even);
  ASSERT_TRUE(r.info.error.empty()) << r.info.error;
  EXPECT_EQ(r.info.plan.pipeline.shares, (std::vector<int>{6, 5, 0, 5}));
  EXPECT_LT(r.info.measurement.repartition_s, 1.0);
  EXPECT_EQ(r.info.measurement.peak_memory_bytes[5], 0.0);
  // Keeping the full plan would have restarted: the simulator charges it (elastic_test.cpp).
  auto other = sim_env(spec_with_shares({{1, EventKind::kRankLoss, "", 5, 1, 0}}));
  other->reset(0);
  EXPECT_GT(other->step(keep).info.measurement.repartition_s, 60.0);
}

// Rank 5 lost at step 1 under tp1d(t=4) blocks, which span the share groups of 2 ranks.
ExperimentSpec tp4_losing_rank_5() {
  ExperimentSpec spec = spec_with_shares({{1, EventKind::kRankLoss, "", 5, 1, 0}});
  spec.initial_plan = "uniform:tp1d(t=4)";
  return spec;
}

// Blocks and shares move in one step: with tp1d(t=4) in force, no share vector of 4 groups of
// 2 ranks is valid, but the mask offers "even" (group 2 out after rank 5's loss) because the
// same step can narrow the blocks to t = 2; taking both avoids the restart that keeping the
// blocks, or moving them first, would pay.
TEST(ShareAction, BlocksAndSharesMoveTogetherOffALostGroup) {
  const ExperimentSpec spec = tp4_losing_rank_5();
  auto env = sim_env(spec);
  auto [obs, info] = env->reset(0);
  const int B = 4, K = env->spec().catalog_size;
  const std::vector<uint8_t> mask = env->action_mask();
  EXPECT_EQ(mask[B * K + 1], 1) << "even (group 2 out) is offered with narrower blocks";
  Plan none = env->run().plan();
  none.pipeline.shares = {6, 5, 0, 5};
  EXPECT_FALSE(plan_fits(env->run(), none)) << "the blocks in force span the share groups";
  EXPECT_TRUE(share_choice_admissible(env->run(), none));
  const int t2 = env->run().catalog().index_of(Strategy::parse("tp1d(t=2)"));
  ASSERT_GE(t2, 0);
  Action both(B, t2);
  both.push_back(1);
  const StepResult r = env->step(both);
  ASSERT_TRUE(r.info.error.empty()) << r.info.error;
  EXPECT_EQ(r.info.plan.pipeline.shares, (std::vector<int>{6, 5, 0, 5}));
  EXPECT_EQ(r.info.plan.blocks[0].degree(), 2);
  EXPECT_EQ(r.info.scalars.count("plan_choice_refused"), 0u);
  EXPECT_LT(r.info.measurement.repartition_s, 60.0) << "no checkpoint restart";
  // Without the shares, the same blocks restart on a spare.
  auto other = sim_env(spec);
  other->reset(0);
  Action blocks_only(B, t2);
  blocks_only.push_back(0);
  EXPECT_GT(other->step(blocks_only).info.measurement.repartition_s, 60.0);
}

// The share choice alone does the same: the step narrows the blocks that span a group by the
// rule the mask offered it under (the widest allowed entry dividing a group, here t = 2), and
// says so; a learner needs one plan-level choice, not every block's at once, to leave a lost
// group out.
TEST(ShareAction, AShareChoiceAloneNarrowsTheBlocksThatSpanAGroup) {
  auto env = sim_env(tp4_losing_rank_5());
  auto [obs, info] = env->reset(0);
  const int B = 4;
  Action share_only = info.plan_indices;  // the blocks as they are (t = 4)
  share_only.push_back(1);                // even over the groups that can train
  const StepResult r = env->step(share_only);
  ASSERT_TRUE(r.info.error.empty()) << r.info.error;
  EXPECT_EQ(r.info.plan.pipeline.shares, (std::vector<int>{6, 5, 0, 5}));
  for (int b = 0; b < B; ++b) EXPECT_EQ(r.info.plan.blocks[b].degree(), 2) << "block " << b;
  EXPECT_EQ(r.info.scalars.count("blocks_narrowed"), 1u);
  EXPECT_EQ(r.info.scalars.count("plan_choice_refused"), 0u);
  EXPECT_LT(r.info.measurement.repartition_s, 60.0) << "no checkpoint restart";
  // The indices the env reports are the narrowed blocks', so keeping them keeps the plan.
  const int t2 = env->run().catalog().index_of(Strategy::parse("tp1d(t=2)"));
  for (int b = 0; b < B; ++b) EXPECT_EQ(r.info.plan_indices[b], t2) << "block " << b;
  Action keep = r.info.plan_indices;
  keep.push_back(0);
  const StepResult again = env->step(keep);
  ASSERT_TRUE(again.info.error.empty()) << again.info.error;
  EXPECT_EQ(again.info.scalars.count("blocks_narrowed"), 0u);
  EXPECT_EQ(again.info.plan.blocks[0].degree(), 2);
  EXPECT_EQ(again.info.measurement.repartition_s, 0.0);
}

// Each component is masked with the others as they are: blocks that fit with the shares in
// force and a share choice that fits with the blocks in force may not fit together. Then the
// share choice is not applied (the shares in force stay, which the blocks admit), rather than
// the step running out of memory: here every block moves to dp (more state a rank) while
// group 0 is left out (a third more sequences on the others).
TEST(ShareAction, AShareChoiceTheSameStepsBlocksDoNotFitIsRefused) {
  ExperimentSpec spec = spec_with_shares();
  const int B = 4;
  // Each step's peak as the env runs it, with room to spare: blocks to dp, group 0 left out
  // (share choice 2, component index 3), both.
  auto peak_of = [&](bool blocks_to_dp, bool without0) {
    auto env = sim_env(spec);
    auto [obs, info] = env->reset(0);
    Action a = info.plan_indices;
    if (blocks_to_dp) a.assign(B, env->run().catalog().index_of(Strategy::dp()));
    a.push_back(without0 ? 3 : 0);
    const StepResult r = env->step(a);
    const auto& p = r.info.measurement.peak_memory_bytes;
    return *std::max_element(p.begin(), p.end());
  };
  const double dp_even = peak_of(true, false), t2_without = peak_of(false, true),
               dp_without = peak_of(true, true);
  ASSERT_GT(dp_without, std::max(dp_even, t2_without));
  spec.cluster.devices[0].memory_bytes = 0.5 * (std::max(dp_even, t2_without) + dp_without);
  auto env = sim_env(spec);
  auto [obs, info] = env->reset(0);
  const int K = env->spec().catalog_size;
  const int dp = env->run().catalog().index_of(Strategy::dp());
  ASSERT_GE(dp, 0);
  const std::vector<uint8_t> mask = env->action_mask();
  for (int b = 0; b < B; ++b) ASSERT_EQ(mask[b * K + dp], 1) << "block " << b;
  ASSERT_EQ(mask[B * K + 3], 1) << "group 0 out is offered with the blocks in force";
  Action both(B, dp);
  both.push_back(3);
  const StepResult r = env->step(both);
  ASSERT_TRUE(r.info.error.empty()) << r.info.error;
  EXPECT_FALSE(r.info.measurement.oom);
  EXPECT_EQ(r.info.scalars.count("plan_choice_refused"), 1u);
  EXPECT_TRUE(r.info.plan.pipeline.shares.empty() ||
              r.info.plan.pipeline.shares == std::vector<int>(4, 4));
  EXPECT_EQ(r.info.plan.blocks[0].degree(), 1);
}

TEST(ShareAction, PassesTheConformanceSuite) {
  envtest::check_env_conformance(
      [](const ExperimentSpec& spec) -> std::unique_ptr<Env> { return sim_env(spec); },
      spec_with_shares({{3, EventKind::kStraggler, "", 1, 2.0, 0},
                        {5, EventKind::kRankLoss, "", 6, 1, 0},
                        {9, EventKind::kRankJoin, "", 6, 1, 0}}));
}

}  // namespace
}  // namespace shardgym
