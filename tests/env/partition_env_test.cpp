#include "env/partition_env.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

using envtest::FakeRun;
using envtest::FakeRunOptions;

// tiny(): 2 layers (B = 4) on 4 GPUs; catalog K = 28; Megatron = uniform tp1d(t=4), index 3.
constexpr int kB = 4, kK = 28, kTp4 = 3, kTp2 = 1, kDp = 0;
constexpr int kD = kB * PartitionEnv::kBlockFeatures + PartitionEnv::kGlobalFixed + 2;

struct Fixture {
  FakeRun* run = nullptr;
  std::unique_ptr<PartitionEnv> env;
};

Fixture make(const ExperimentSpec& spec, FakeRunOptions options = {}) {
  auto run = std::make_unique<FakeRun>(spec, options);
  Fixture f;
  f.run = run.get();
  f.env = std::make_unique<PartitionEnv>("test/Fake-v0", std::move(run), spec);
  return f;
}

Action uniform(int index) { return Action(kB, index); }

TEST(PartitionEnv, SpecDescribesSpacesAndFlags) {
  Fixture f = make(test_specs::tiny());
  const EnvSpec& s = f.env->spec();
  EXPECT_EQ(s.id, "test/Fake-v0");
  EXPECT_EQ(s.num_blocks, kB);
  EXPECT_EQ(s.catalog_size, kK);
  EXPECT_EQ(s.backend, "sim");
  EXPECT_EQ(s.observation_space.flat_size(), kD);
  EXPECT_TRUE(s.observation_space.deterministic);
  EXPECT_FALSE(s.observation_space.platform_dependent);
  EXPECT_EQ(s.action_space.nvec, std::vector<int64_t>(kB, kK));
  EXPECT_EQ(f.env->initial_plan(), Plan::uniform(Strategy::tp1d(4), kB));

  FakeRunOptions live;
  live.backend = "live";
  live.deterministic = false;
  Fixture g = make(test_specs::tiny(), live);
  EXPECT_FALSE(g.env->spec().deterministic);
  EXPECT_FALSE(g.env->spec().observation_space.deterministic);
  EXPECT_TRUE(g.env->spec().observation_space.platform_dependent);
}

TEST(PartitionEnv, ResetObservationFollowsTheLayout) {
  Fixture f = make(test_specs::tiny());
  ResetResult r = f.env->reset(1);
  ASSERT_EQ(r.obs.size(), static_cast<size_t>(kD));
  EXPECT_EQ(f.run->resets, 1);
  EXPECT_EQ(f.run->steps, 1) << "reset measures one iteration of the initial plan";
  for (int b = 0; b < kB; ++b) {
    const float* x = r.obs.data() + b * PartitionEnv::kBlockFeatures;
    EXPECT_FLOAT_EQ(x[0], 3.0f / kK);  // tp1d(t=4) is catalog entry 3
    EXPECT_FLOAT_EQ(x[1], 1.0f);       // degree 4 of 4 ranks
    EXPECT_EQ(x[2], 1.0f);             // tp1d
    EXPECT_EQ(x[3], 0.0f);
    EXPECT_EQ(x[4], 0.0f);
    EXPECT_EQ(x[5], 0.0f);
    EXPECT_EQ(x[6], 0.0f);
    EXPECT_FLOAT_EQ(x[7], 1.0f);  // times relative to the reference: unchanged
    EXPECT_FLOAT_EQ(x[8], 1.0f);
    EXPECT_FLOAT_EQ(x[9], 1.0f);
  }
  const float* g = r.obs.data() + kB * PartitionEnv::kBlockFeatures;
  EXPECT_EQ(g[0], 0.0f);                        // step
  EXPECT_EQ(g[1], 0.0f);                        // phase
  EXPECT_EQ(g[2], 1.0f);                        // seq factor
  EXPECT_EQ(g[3], 1.0f);                        // slowdown
  EXPECT_FLOAT_EQ(g[4], 6e9f / 1e12f);          // 4 blocks × 1.5 GB over 1 TB
  EXPECT_FLOAT_EQ(g[5], 1.0f);                  // latency vs initial
  EXPECT_EQ(g[6], 1.0f);                        // nvlink at nominal
  EXPECT_EQ(g[7], 1.0f);                        // eth
  EXPECT_EQ(r.info.plan, f.env->initial_plan());
  EXPECT_TRUE(r.info.measurement.ok);
  EXPECT_GT(r.info.measurement.step_latency_s, 0);
}

TEST(PartitionEnv, ObservationPartsTileTheObservation) {
  Fixture f = make(test_specs::tiny());
  const std::vector<ObservationPart>& parts = f.env->spec().observation_parts;
  ASSERT_EQ(parts.size(), 3u) << "no pipeline part with one stage";
  EXPECT_EQ(parts[0].name, "blocks");
  EXPECT_EQ(parts[0].shape, (std::vector<int64_t>{kB, PartitionEnv::kBlockFeatures}));
  EXPECT_EQ(parts[1].name, "global");
  EXPECT_EQ(parts[1].offset, kB * PartitionEnv::kBlockFeatures);
  EXPECT_EQ(parts[2].name, "links");
  EXPECT_EQ(parts[2].shape, std::vector<int64_t>{2});
  EXPECT_EQ(parts[2].offset + 2, kD) << "the parts end where the observation ends";

  // With p = 2 stages the pipeline part closes the observation: 2p − 1 = 3 entries.
  Fixture p = make(test_specs::pipelined());
  const std::vector<ObservationPart>& pp = p.env->spec().observation_parts;
  ASSERT_EQ(pp.size(), 4u);
  EXPECT_EQ(pp[3].name, "pipeline");
  EXPECT_EQ(pp[3].shape, std::vector<int64_t>{3});
  EXPECT_EQ(pp[3].offset + 3, p.env->spec().observation_space.flat_size());
}

TEST(PartitionEnv, InfoGivesThePlanInForceAsCatalogIndices) {
  FakeRunOptions options;
  options.fail_at_step = 3;
  Fixture f = make(test_specs::tiny(), options);
  ResetResult r = f.env->reset(0);
  EXPECT_EQ(r.info.plan_indices, std::vector<int32_t>(kB, kTp4));
  StepResult s = f.env->step({kTp2, kTp4, kTp2, kTp4});
  EXPECT_EQ(s.info.plan_indices, (std::vector<int32_t>{kTp2, kTp4, kTp2, kTp4}));
  for (int b = 0; b < kB; ++b) {  // the float feature agrees with the int
    EXPECT_FLOAT_EQ(s.obs[b * PartitionEnv::kBlockFeatures],
                    static_cast<float>(s.info.plan_indices[b]) / kK);
  }
  EXPECT_EQ(f.env->step(uniform(kTp2)).info.plan_indices, std::vector<int32_t>(kB, kTp2));
  StepResult bad = f.env->step(uniform(kTp4));
  ASSERT_TRUE(bad.truncated);
  EXPECT_EQ(bad.info.plan_indices, std::vector<int32_t>(kB, kTp2)) << "the old plan stays";
}

TEST(PartitionEnv, StepAppliesThePlanAndChargesTheRepartition) {
  Fixture f = make(test_specs::tiny());
  f.env->reset(0);
  StepResult r = f.env->step(uniform(kTp2));
  EXPECT_FALSE(r.terminated);
  EXPECT_FALSE(r.truncated);
  EXPECT_TRUE(r.info.error.empty());
  EXPECT_EQ(r.info.plan, Plan::uniform(Strategy::tp1d(2), kB));
  EXPECT_EQ(f.run->plan(), r.info.plan);
  EXPECT_EQ(f.env->elapsed_steps(), 1);
  // FakeRun: latency = Σ_layers (3·fwd_attn + comm) + (3·fwd_mlp + comm) with t = 2:
  //   fwd_attn = 0.5 ms, fwd_mlp = 1 ms, comm = 0.2 ms → 9.8 ms; repartition of 4 blocks:
  //   4 · 1e8 B · 4 ranks / 1e11 B/s / 4 = 4 ms; 256 tokens.
  EXPECT_NEAR(r.reward, -(9.8e-3 + 4e-3) / 256 * 1e6, 1e-9);  // rounding of the sums only
  EXPECT_DOUBLE_EQ(r.info.scalars.at("raw_reward"), r.reward);
  const float* attn = r.obs.data();
  EXPECT_FLOAT_EQ(attn[0], 1.0f / kK);
  EXPECT_FLOAT_EQ(attn[1], 0.5f);
  EXPECT_FLOAT_EQ(attn[7], 2.0f);           // half the degree: twice the compute
  EXPECT_FLOAT_EQ(attn[9], 2e-4f / 3e-4f);  // comm 4e-4·(1/2) vs 4e-4·(3/4)
  const float* g = r.obs.data() + kB * PartitionEnv::kBlockFeatures;
  EXPECT_FLOAT_EQ(g[0], 1.0f / 20);  // step 1 of steps_per_episode = 20

  StepResult again = f.env->step(uniform(kTp2));  // nothing moves now
  EXPECT_NEAR(again.reward, -9.8e-3 / 256 * 1e6, 1e-9);
  EXPECT_EQ(again.info.measurement.repartition_bytes, 0);
}

TEST(PartitionEnv, InvalidActionsThrowNamingTheBlock) {
  FakeRunOptions tight;
  tight.capacity = 7e9;  // tp1d(4) everywhere uses 6 GB; one block on dp would need 7.5 GB
  Fixture f = make(test_specs::tiny(), tight);
  EXPECT_THROW(f.env->step(uniform(kTp4)), std::logic_error) << "step before reset";
  EXPECT_THROW(f.env->action_mask(), std::logic_error);
  f.env->reset(0);
  const std::vector<uint8_t> mask = f.env->action_mask();
  ASSERT_EQ(mask.size(), static_cast<size_t>(kB * kK));
  for (int b = 0; b < kB; ++b) {
    EXPECT_EQ(mask[b * kK + kDp], 0) << "dp does not fit for block " << b;
    EXPECT_EQ(mask[b * kK + kTp2], 1);
    EXPECT_EQ(mask[b * kK + kTp4], 1);
  }
  EXPECT_THROW(f.env->step(Action(kB - 1, kTp4)), std::invalid_argument);
  try {
    f.env->step({kTp4, kTp4, kK, kTp4});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("block 2 (layer 1 attention)"), std::string::npos)
        << e.what();
  }
  try {
    f.env->step({kTp4, kDp, kTp4, kTp4});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("block 1 (layer 0 mlp): index 0 (dp) is masked"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(f.env->elapsed_steps(), 0);
  EXPECT_EQ(f.run->steps, 1) << "rejected actions never reach the run";
  EXPECT_NO_THROW(f.env->step({kTp4, kTp2, kTp4, kTp4}));
}

// Each block's mask row holds the others as they are: two blocks each allowed alone may not
// fit together. Such a step is refused as a whole (the plan in force stays and is measured)
// instead of running the job out of memory; one of them alone is taken.
TEST(PartitionEnv, BlocksThatFitOneByOneButNotTogetherAreRefusedAsAStep) {
  FakeRunOptions tight;
  tight.capacity = 8e9;  // tp1d(4) everywhere uses 6 GB; one block on dp 7.5 GB, two 9 GB
  Fixture f = make(test_specs::tiny(), tight);
  f.env->reset(0);
  const std::vector<uint8_t> mask = f.env->action_mask();
  for (int b = 0; b < kB; ++b) ASSERT_EQ(mask[b * kK + kDp], 1) << "block " << b;
  const StepResult both = f.env->step({kDp, kDp, kTp4, kTp4});
  ASSERT_TRUE(both.info.error.empty()) << both.info.error;
  EXPECT_FALSE(both.truncated);
  EXPECT_FALSE(both.info.measurement.oom);
  EXPECT_EQ(both.info.scalars.count("step_refused"), 1u);
  EXPECT_EQ(both.info.plan_indices, uniform(kTp4)) << "the plan in force stays";
  EXPECT_EQ(both.info.measurement.repartition_bytes, 0.0);
  const StepResult one = f.env->step({kDp, kTp4, kTp4, kTp4});
  ASSERT_TRUE(one.info.error.empty()) << one.info.error;
  EXPECT_EQ(one.info.scalars.count("step_refused"), 0u);
  EXPECT_EQ(one.info.plan_indices, (std::vector<int32_t>{kDp, kTp4, kTp4, kTp4}));
  EXPECT_FALSE(one.info.measurement.oom);
}

TEST(PartitionEnv, MaskRowsAreComputedOnlyWhenNeeded) {
  Fixture f = make(test_specs::tiny());
  f.env->reset(0);
  EXPECT_EQ(f.run->mask_calls, 0) << "nothing asked for the mask yet";
  // The first ask under a plan writes every row straight out (a vector env asks once a step,
  // and the step then needs only the rows it changes); asked again, the rows are kept.
  f.env->action_mask();
  EXPECT_EQ(f.run->mask_calls, kB);
  f.env->action_mask();
  EXPECT_EQ(f.run->mask_calls, 2 * kB);
  f.env->action_mask();
  EXPECT_EQ(f.run->mask_calls, 2 * kB) << "cached";
  f.env->step(uniform(kTp4));  // same plan: every row is still valid
  f.env->step(uniform(kTp4));
  EXPECT_EQ(f.run->mask_calls, 2 * kB);
  f.env->step({kTp2, kTp4, kTp4, kTp4});  // validated against the cached rows
  EXPECT_EQ(f.run->mask_calls, 2 * kB);
  f.env->step({kTp2, kTp2, kTp4, kTp4});  // plan changed: only block 1's row is needed
  EXPECT_EQ(f.run->mask_calls, 2 * kB + 1);
  f.env->step({kTp2, kTp2, kTp4, kTp4});  // all kept: only shapes are checked, no row
  EXPECT_EQ(f.run->mask_calls, 2 * kB + 1);
  f.env->step({kTp2, kTp2, kTp4, kTp4});
  EXPECT_EQ(f.run->mask_calls, 2 * kB + 1);
  f.env->action_mask();  // every row, for the plan in force
  EXPECT_EQ(f.run->mask_calls, 2 * kB + 1 + kB);
}

TEST(PartitionEnv, PhaseChangeRefreshesMaskAndObservation) {
  ExperimentSpec spec = test_specs::tiny();
  // Env step k runs under events with step ≤ k; the mask and the context describe the next.
  test_specs::add_seq_change(spec, 3, 48);
  test_specs::add_link_drop(spec, 3, "nvlink", 0.5);
  FakeRunOptions options;
  // tp1d(4): 1.5 GB per block at seq 32, 2 GB at seq 48 (8 GB in all, fits). dp on one
  // block: 7.5 GB in all at seq 32 (fits), 9.5 GB at seq 48 (does not).
  options.capacity = 9e9;
  Fixture f = make(spec, options);
  f.env->reset(0);
  EXPECT_EQ(f.env->action_mask()[kDp], 1);
  StepResult r1 = f.env->step(uniform(kTp4));
  EXPECT_EQ(f.env->action_mask()[kDp], 1);
  StepResult r2 = f.env->step(uniform(kTp4));
  EXPECT_EQ(f.env->action_mask()[kDp], 0) << "the mask must follow the sequence change";
  const float* g1 = r1.obs.data() + kB * PartitionEnv::kBlockFeatures;
  const float* g2 = r2.obs.data() + kB * PartitionEnv::kBlockFeatures;
  EXPECT_EQ(g1[1], 0.0f);
  EXPECT_FLOAT_EQ(g2[1], 0.5f);  // the next step is in phase 1 of 2
  EXPECT_FLOAT_EQ(g2[2], 1.5f);  // seq 48 / 32
  EXPECT_FLOAT_EQ(g2[6], 0.5f);  // nvlink at half bandwidth
  EXPECT_FLOAT_EQ(r2.obs[7], 1.0f) << "step 2 ran before the change";
  StepResult r3 = f.env->step(uniform(kTp4));
  EXPECT_FLOAT_EQ(r3.obs[7], 1.5f) << "compute grows with the sequence";
  EXPECT_THROW(f.env->step({kDp, kTp4, kTp4, kTp4}), std::invalid_argument);
}

TEST(PartitionEnv, FailedStepTruncatesAndEndsTheEpisode) {
  FakeRunOptions options;
  options.fail_at_step = 2;
  Fixture f = make(test_specs::tiny(), options);
  f.env->reset(0);
  StepResult ok = f.env->step(uniform(kTp2));
  EXPECT_FALSE(ok.truncated);
  StepResult bad = f.env->step(uniform(kTp4));
  EXPECT_TRUE(bad.truncated);
  EXPECT_FALSE(bad.terminated);
  EXPECT_EQ(bad.reward, 0.0);
  EXPECT_NE(bad.info.error.find("fake failure at step 2"), std::string::npos);
  EXPECT_FALSE(bad.info.measurement.ok);
  EXPECT_EQ(bad.info.plan, Plan::uniform(Strategy::tp1d(2), kB)) << "the old plan stays";
  EXPECT_TRUE(f.env->spec().observation_space.contains(bad.obs));
  // Measured entries keep their last values and the plan did not change: only the step
  // counter differs.
  Observation a = ok.obs, b = bad.obs;
  a[kB * PartitionEnv::kBlockFeatures] = b[kB * PartitionEnv::kBlockFeatures] = 0;
  EXPECT_EQ(a, b);
  EXPECT_THROW(f.env->step(uniform(kTp2)), std::logic_error);
  f.env->reset(1);
  EXPECT_FALSE(f.env->step(uniform(kTp2)).truncated);
}

TEST(PartitionEnv, OutOfMemoryEndsTheEpisodeEvenWhenTheRunReportsFigures) {
  ExperimentSpec spec = test_specs::tiny();
  // The sequence grows at step 2: tp1d(4) then needs 2 GB per block, 8 GB in all.
  test_specs::add_seq_change(spec, 2, 48);
  FakeRunOptions options;
  options.capacity = 7e9;  // 6 GB fits at seq 32, 8 GB does not at seq 48
  options.oom_is_ok = true;
  options.mask_capacity = 9e9;  // the estimate behind the mask misses
  Fixture f = make(spec, options);
  f.env->reset(0);
  StepResult fits = f.env->step(uniform(kTp4));
  EXPECT_FALSE(fits.truncated);
  EXPECT_LT(fits.reward, 0.0);  // raw reward: minus the cost
  StepResult oom = f.env->step(uniform(kTp4));
  ASSERT_TRUE(oom.info.measurement.ok) << "the run reported figures";
  ASSERT_TRUE(oom.info.measurement.oom);
  EXPECT_TRUE(oom.truncated);
  EXPECT_FALSE(oom.terminated);
  EXPECT_EQ(oom.reward, 0.0) << "a plan that does not fit earns nothing";
  EXPECT_NE(oom.info.error.find("out of memory"), std::string::npos) << oom.info.error;
  EXPECT_THROW(f.env->step(uniform(kTp4)), std::logic_error);
  f.env->reset(1);
  EXPECT_FALSE(f.env->step(uniform(kTp4)).truncated);
}

TEST(PartitionEnv, KeepingAPlanThatNoLongerFitsRunsOutOfMemory) {
  ExperimentSpec spec = test_specs::tiny();
  test_specs::add_seq_change(spec, 2, 48);  // tp1d(4): 6 GB in all at seq 32, 8 GB at 48
  FakeRunOptions options;
  options.capacity = 7e9;
  options.oom_is_ok = true;
  Fixture f = make(spec, options);
  f.env->reset(0);
  EXPECT_FALSE(f.env->step(uniform(kTp4)).truncated);
  // The mask already says the plan in force will not fit the next step...
  EXPECT_EQ(f.env->action_mask()[kTp4], 0);
  // ...an agent that keeps it anyway (a static plan) is not refused: the step runs out of
  // memory and ends the episode.
  StepResult oom = f.env->step(uniform(kTp4));
  EXPECT_TRUE(oom.truncated);
  EXPECT_NE(oom.info.error.find("out of memory"), std::string::npos) << oom.info.error;
  // Changing a block to a masked entry is still refused.
  f.env->reset(1);
  EXPECT_THROW(f.env->step({kDp, kTp4, kTp4, kTp4}), std::invalid_argument);
}

TEST(PartitionEnv, SeedSequenceContinuesWithoutAnExplicitSeed) {
  FakeRunOptions noisy;
  noisy.noise = 0.2;
  // Resets with the given seeds in order, then one step: its reward carries the noise.
  auto reward_after = [&](std::vector<std::optional<uint64_t>> seeds) {
    Fixture f = make(test_specs::tiny(), noisy);
    for (const auto& s : seeds) f.env->reset(s);
    return f.env->step(uniform(kTp2)).reward;
  };
  EXPECT_NE(reward_after({5}), reward_after({7})) << "noise depends on the seed";
  EXPECT_EQ(reward_after({5, std::nullopt}), reward_after({6}));
  EXPECT_EQ(reward_after({std::nullopt}), reward_after({0}));
  EXPECT_EQ(reward_after({std::nullopt, std::nullopt}), reward_after({1}));
}

TEST(PartitionEnv, PlansAndActionsConvert) {
  Fixture f = make(test_specs::tiny());
  const Action a = {kTp2, kTp4, kDp, kTp4};
  const Plan p = f.env->plan_from_action(a);
  EXPECT_EQ(p.blocks[0], Strategy::tp1d(2));
  EXPECT_EQ(p.blocks[2], Strategy::dp());
  EXPECT_EQ(f.env->action_from_plan(p), a);
  EXPECT_THROW(f.env->plan_from_action({0, 0}), std::invalid_argument);
  EXPECT_THROW(f.env->plan_from_action({0, 0, 0, kK}), std::invalid_argument);
  Plan odd = p;
  odd.blocks[3].chunks = 3;
  EXPECT_THROW(f.env->action_from_plan(odd), std::invalid_argument);
}

TEST(PartitionEnv, InitialPlanOutsideTheCatalogIsObservedAndLeft) {
  ExperimentSpec spec = test_specs::tiny();
  spec.catalog.chunks = {1};
  spec.initial_plan = "uniform:tp1d(t=4,chunks=2)";
  Fixture f = make(spec);
  ResetResult r = f.env->reset(0);
  EXPECT_EQ(f.env->spec().catalog_size, 14);
  EXPECT_EQ(r.obs[0], 1.0f) << "outside the catalog";
  EXPECT_EQ(r.obs[5], 1.0f) << "chunks > 1";
  EXPECT_THROW(f.env->action_from_plan(f.env->initial_plan()), std::invalid_argument);
  StepResult s = f.env->step(uniform(kTp4));
  EXPECT_FLOAT_EQ(s.obs[0], 3.0f / 14);
  EXPECT_EQ(s.obs[5], 0.0f);
}

TEST(PartitionEnv, RejectsAnUnusableRunOrPlan) {
  ExperimentSpec spec = test_specs::tiny();
  EXPECT_THROW(PartitionEnv("x", nullptr, spec), std::invalid_argument);
  spec.initial_plan = "uniform:tp1d(t=3)";
  EXPECT_THROW(make(spec), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
