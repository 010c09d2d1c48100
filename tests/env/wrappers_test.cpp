#include "env/wrappers.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "env/incremental_action.h"
#include "env/partition_env.h"
#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

using envtest::FakeRun;
using envtest::FakeRunOptions;

constexpr int kB = 4, kK = 28, kTp4 = 3, kTp2 = 1, kTp2Sp = 2;

std::unique_ptr<Env> fake_env(const ExperimentSpec& spec, FakeRunOptions options = {},
                              FakeRun** run = nullptr) {
  auto r = std::make_unique<FakeRun>(spec, options);
  if (run) *run = r.get();
  return std::make_unique<PartitionEnv>("test/Fake-v0", std::move(r), spec);
}

Plan megatron(const ExperimentSpec& spec) {
  return resolve_plan("megatron", spec.model, spec.cluster);
}

// ------------------------------------------------------------------------------ TimeLimit

TEST(TimeLimit, TruncatesAtTheLimitAndAsksForReset) {
  TimeLimit env(fake_env(test_specs::tiny()), 3);
  EXPECT_EQ(env.spec().max_episode_steps, 3);
  EXPECT_EQ(env.inner().spec().max_episode_steps, 0);
  env.reset(0);
  EXPECT_FALSE(env.step(Action(kB, kTp4)).truncated);
  EXPECT_FALSE(env.step(Action(kB, kTp4)).truncated);
  StepResult last = env.step(Action(kB, kTp4));
  EXPECT_TRUE(last.truncated);
  EXPECT_FALSE(last.terminated);
  EXPECT_THROW(env.step(Action(kB, kTp4)), std::logic_error);
  env.reset();
  EXPECT_EQ(env.elapsed_steps(), 0);
  EXPECT_FALSE(env.step(Action(kB, kTp4)).truncated);
  EXPECT_THROW(TimeLimit(fake_env(test_specs::tiny()), 0), std::invalid_argument);
}

// ------------------------------------------------------------------------ NormalizeReward

TEST(NormalizeReward, MegatronScoresOneAndBetterPlansMore) {
  const ExperimentSpec spec = test_specs::tiny();
  FakeRun* run = nullptr;
  NormalizeReward env(fake_env(spec, {}, &run), spec.reward, megatron(spec));
  ResetResult r = env.reset(0);
  EXPECT_GT(r.info.scalars.at("baseline_latency_per_token_s"), 0);
  StepResult same = env.step(Action(kB, kTp4));
  EXPECT_DOUBLE_EQ(same.reward, 1.0);
  EXPECT_LT(same.info.scalars.at("raw_reward"), 0);
  // FakeRun: an iteration takes 5.7 ms on tp1d(t=4), 9.8 ms on tp1d(t=2); moving all four
  // blocks costs 4 ms once.
  StepResult moved = env.step(Action(kB, kTp2));
  EXPECT_NEAR(moved.reward, 5.7e-3 / (9.8e-3 + 4e-3), 1e-12);  // rounding only
  StepResult settled = env.step(Action(kB, kTp2));
  EXPECT_NEAR(settled.reward, 5.7e-3 / 9.8e-3, 1e-12);
}

TEST(NormalizeReward, TimeSavedCountsSecondsAgainstTheFirstStepsBaseline) {
  // latency_as: time_saved: 1 + (Megatron-LM's step time − the plan's) / Megatron-LM's step
  // time at the episode's first step, so the return is N plus the seconds saved in those
  // units, and a step whose baseline is short weighs less.
  ExperimentSpec spec = test_specs::tiny();
  spec.reward.latency_time_saved = true;
  NormalizeReward env(fake_env(spec), spec.reward, megatron(spec));
  env.reset(0);
  EXPECT_DOUBLE_EQ(env.step(Action(kB, kTp4)).reward, 1.0);
  // FakeRun as above: tp1d(t=4) 5.7 ms, tp1d(t=2) 9.8 ms, a move of all four blocks 4 ms.
  EXPECT_NEAR(env.step(Action(kB, kTp2)).reward, 1 + (5.7 - 9.8 - 4) / 5.7, 1e-9);
  EXPECT_NEAR(env.step(Action(kB, kTp2)).reward, 1 + (5.7 - 9.8) / 5.7, 1e-9);
  // A link drop lengthens Megatron-LM's step: the same plan's reward follows the seconds.
  ExperimentSpec drop = spec;
  test_specs::add_link_drop(drop, 1, "nvlink", 0.5);
  FakeRun* run = nullptr;
  NormalizeReward dropped(fake_env(drop, {}, &run), drop.reward, megatron(drop));
  dropped.reset(0);
  dropped.step(Action(kB, kTp4));
  const double after = dropped.step(Action(kB, kTp4)).reward;
  EXPECT_NEAR(after, 1.0, 1e-12) << "Megatron-LM's own plan saves nothing";
}

TEST(NormalizeReward, WeightsMixTheTerms) {
  ExperimentSpec spec = test_specs::tiny();
  spec.reward.latency = 1;
  spec.reward.memory = 3;
  NormalizeReward env(fake_env(spec), spec.reward, megatron(spec));
  env.reset(0);
  env.step(Action(kB, kTp2));
  StepResult r = env.step(Action(kB, kTp2));
  // Memory per block: tp1d(4) 1.5 GB, tp1d(2) 2 GB → ratio 0.75; latency ratio 5.7 / 9.8.
  EXPECT_NEAR(r.reward, (1 * 5.7 / 9.8 + 3 * 0.75) / 4, 1e-12);  // rounding only
  spec.reward.latency = 0;
  spec.reward.memory = 0;
  EXPECT_THROW(NormalizeReward(fake_env(spec), spec.reward, megatron(spec)),
               std::invalid_argument);
}

TEST(NormalizeReward, EstimatesAreCachedUntilConditionsChange) {
  ExperimentSpec spec = test_specs::tiny();
  test_specs::add_link_drop(spec, 3, "nvlink", 0.5);
  FakeRun* run = nullptr;
  NormalizeReward env(fake_env(spec, {}, &run), spec.reward, megatron(spec));
  env.reset(0);
  const int after_reset = run->estimates;
  env.step(Action(kB, kTp4));
  env.step(Action(kB, kTp4));
  EXPECT_EQ(run->estimates, after_reset) << "same conditions: no new estimate";
  StepResult r = env.step(Action(kB, kTp4));
  EXPECT_EQ(run->estimates, after_reset + 1);
  EXPECT_DOUBLE_EQ(r.reward, 1.0) << "the baseline follows the link drop";
}

TEST(NormalizeReward, MeasuresTheBaselineWhenTheRunCannotEstimate) {
  FakeRunOptions live;
  live.can_estimate = false;
  live.noise = 0.1;
  ExperimentSpec spec = test_specs::tiny();
  FakeRun* run = nullptr;
  NormalizeReward env(fake_env(spec, live, &run), spec.reward, megatron(spec));
  env.reset(3);
  EXPECT_EQ(run->resets, 1) << "the reference iteration of Megatron is the baseline";
  const StepResult r = env.step(Action(kB, kTp4));
  EXPECT_GT(r.reward, 0.5);
  EXPECT_LT(r.reward, 2.0);

  // Another initial plan: the baseline is measured on its own, then the episode restarts.
  spec.initial_plan = "uniform:tp1d(t=2)";
  NormalizeReward other(fake_env(spec, live, &run), spec.reward, megatron(spec));
  other.reset(3);
  EXPECT_EQ(run->resets, 3) << "episode, baseline measurement, episode again";
  EXPECT_EQ(other.run().plan(), Plan::uniform(Strategy::tp1d(2), kB));
  EXPECT_EQ(other.elapsed_steps(), 0);
  // Noise-free this is 5.7 / 9.8 ≈ 0.58; each side carries up to +10% of noise, so the
  // ratio lies within a factor 1.1 of it (±0.06).
  const double reward = other.step(Action(kB, kTp2)).reward;
  EXPECT_NEAR(reward, 5.7 / 9.8, 0.06);
}

TEST(NormalizeReward, FailedStepsScoreZero) {
  FakeRunOptions failing;
  failing.fail_at_step = 1;
  const ExperimentSpec spec = test_specs::tiny();
  NormalizeReward env(fake_env(spec, failing), spec.reward, megatron(spec));
  env.reset(0);
  StepResult r = env.step(Action(kB, kTp4));
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.reward, 0.0);
}

// ---------------------------------------------------------------------- IncrementalAction

TEST(IncrementalAction, ChangesOneBlockOrNothing) {
  IncrementalAction env(fake_env(test_specs::tiny()));
  EXPECT_EQ(env.spec().action_space.kind, SpaceKind::kDiscrete);
  EXPECT_EQ(env.spec().action_space.nvec.at(0), 1 + kB * kK);
  env.reset(0);
  const std::vector<uint8_t> mask = env.action_mask();
  ASSERT_EQ(mask.size(), static_cast<size_t>(1 + kB * kK));
  EXPECT_EQ(mask[0], 1);
  EXPECT_EQ(env.expand({0}), Action(kB, kTp4));
  StepResult noop = env.step({0});
  EXPECT_EQ(noop.info.plan, Plan::uniform(Strategy::tp1d(4), kB));
  StepResult change = env.step({1 + 2 * kK + kTp2Sp});  // block 2 → tp1d(t=2,sp=1)
  EXPECT_EQ(change.info.plan.blocks[2], Strategy::tp1d(2, true));
  EXPECT_EQ(change.info.plan.blocks[1], Strategy::tp1d(4));
  EXPECT_EQ(env.expand({0}), (Action{kTp4, kTp4, kTp2Sp, kTp4}));
  EXPECT_THROW(env.step({1 + kB * kK}), std::invalid_argument);
  EXPECT_THROW(env.step({0, 0}), std::invalid_argument);
}

TEST(IncrementalAction, MaskFollowsTheInnerMask) {
  FakeRunOptions tight;
  tight.capacity = 7e9;  // dp does not fit for any block (see partition_env_test)
  IncrementalAction env(fake_env(test_specs::tiny(), tight));
  env.reset(0);
  const std::vector<uint8_t> mask = env.action_mask();
  const std::vector<uint8_t> inner = env.inner().action_mask();
  EXPECT_EQ(mask[0], 1);
  for (int i = 0; i < kB * kK; ++i) EXPECT_EQ(mask[1 + i], inner[i]) << i;
  EXPECT_THROW(env.step({1 + 1 * kK + 0}), std::invalid_argument);  // block 1 → dp
}

// ---------------------------------------------------------------------------- RecordTrace

struct FakeSink : TraceSink {
  std::vector<std::string> events;
  void begin_episode(const EnvSpec& spec, uint64_t seed, const ResetResult& r) override {
    events.push_back("begin " + spec.id + " seed=" + std::to_string(seed));
  }
  void record_step(const Action& action, const StepResult& r) override {
    events.push_back(std::string("step") + (r.truncated ? " truncated" : ""));
  }
  void end_episode() override { events.push_back("end"); }
};

TEST(RecordTrace, EveryEpisodeIsBegunAndEnded) {
  auto sink = std::make_shared<FakeSink>();
  {
    RecordTrace env(std::make_unique<TimeLimit>(fake_env(test_specs::tiny()), 2), sink);
    EXPECT_THROW(env.step(Action(kB, kTp4)), std::logic_error);
    env.reset(4);
    env.step(Action(kB, kTp4));
    env.step(Action(kB, kTp4));  // truncated: the episode ends here
    env.reset();                 // seed 5
    env.step(Action(kB, kTp4));
    env.reset(9);                // ends the open episode first
    EXPECT_THROW(env.step(Action(kB, 99)), std::invalid_argument);
  }  // destruction ends the last one
  const std::vector<std::string> expected = {
      "begin test/Fake-v0 seed=4", "step", "step truncated", "end",
      "begin test/Fake-v0 seed=5", "step", "end",
      "begin test/Fake-v0 seed=9", "end"};
  EXPECT_EQ(sink->events, expected);
}

}  // namespace
}  // namespace shardgym
