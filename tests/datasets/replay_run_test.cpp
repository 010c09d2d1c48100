// ReplayRun / shardgym/TPReplay-v0: record episodes of a PartitionEnv over a FakeRun (noisy, so
// a replay that recomputed anything would show), then play them back through the registry and
// check that the recorded actions give back the recorded measurements and rewards, that any
// other plan fails clearly, and that the env passes the conformance checks that apply to it.
#include "datasets/replay_run.h"

#include <random>

#include <gtest/gtest.h>

#include "datasets/trace_writer.h"
#include "env/partition_env.h"
#include "env/registry.h"
#include "env/wrappers.h"
#include "tests/core/expect_measurement.h"
#include "tests/datasets/trace_fixtures.h"
#include "tests/env/conformance.h"
#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

constexpr const char* kReplay = "shardgym/TPReplay-v0";
constexpr int kSteps = 6;

struct Recorded {
  uint64_t seed;
  ResetResult reset;
  std::vector<Action> actions;
  std::vector<StepResult> steps;
};

class Replay : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = test_specs::tiny();
    path_ = (tracetest::scratch_dir("replay") / "t.h5").string();
    envtest::FakeRunOptions fake;
    fake.noise = 0.2;
    auto sink = std::make_shared<TraceWriter>(path_, make_trace_metadata(spec_, "abc"));
    RecordTrace env(
        std::make_unique<PartitionEnv>("shardgym/TPFake-v0",
                                       std::make_unique<envtest::FakeRun>(spec_, fake), spec_),
        sink);
    std::mt19937_64 rng(3);
    for (uint64_t seed : {5, 6}) {
      Recorded r{seed, env.reset(seed), {}, {}};
      for (int t = 0; t < kSteps; ++t) {
        const std::vector<uint8_t> mask = env.action_mask();
        Action a = env.spec().action_space.sample(rng, &mask);
        r.actions.push_back(a);
        r.steps.push_back(env.step(a));
      }
      recorded_.push_back(std::move(r));
    }
    // The last episode is still open; RecordTrace ends it when it goes away.
    spec_.replay_trace = path_;
  }

  ExperimentSpec spec_;
  std::string path_;
  std::vector<Recorded> recorded_;
};

TEST_F(Replay, RecordedActionsGiveRecordedMeasurements) {
  ASSERT_TRUE(env_registered(kReplay));
  std::unique_ptr<Env> env = make_bare_env(kReplay, spec_);
  EXPECT_EQ(env->spec().backend, "replay");
  EXPECT_EQ(env->run().backend(), "replay");
  for (const Recorded& rec : recorded_) {
    SCOPED_TRACE("seed " + std::to_string(rec.seed));
    ResetResult r = env->reset(rec.seed);
    testing::expect_same_measurement(r.info.measurement, rec.reset.info.measurement);
    EXPECT_EQ(r.info.plan, rec.reset.info.plan);
    auto& run = dynamic_cast<ReplayRun&>(env->run());
    EXPECT_EQ(run.episode().info.seed, rec.seed);
    EXPECT_EQ(run.steps_left(), kSteps);
    for (int t = 0; t < kSteps; ++t) {
      ASSERT_TRUE(run.next_plan().has_value());
      EXPECT_EQ(*run.next_plan(), rec.steps[t].info.plan);
      StepResult s = env->step(rec.actions[t]);
      ASSERT_TRUE(s.info.error.empty()) << s.info.error;
      testing::expect_same_measurement(s.info.measurement, rec.steps[t].info.measurement);
      EXPECT_EQ(s.reward, rec.steps[t].reward) << "same measurement, same reward weights";
      EXPECT_EQ(s.info.plan, rec.steps[t].info.plan);
    }
    EXPECT_EQ(run.steps_left(), 0);
    StepResult past = env->step(rec.actions.back());
    EXPECT_TRUE(past.truncated);
    EXPECT_NE(past.info.error.find("recording ended after 6 steps"), std::string::npos)
        << past.info.error;
  }
}

TEST_F(Replay, AnotherPlanFailsNamingBlockAndStrategies) {
  std::unique_ptr<Env> env = make_bare_env(kReplay, spec_);
  env->reset(5);
  const StrategyCatalog& catalog = env->run().catalog();
  const std::vector<uint8_t> mask = env->action_mask();
  Action a = recorded_[0].actions[0];
  // Another shape-valid strategy for block 1.
  const int k = catalog.size();
  int other = -1;
  for (int c = 0; c < k && other < 0; ++c) {
    if (c != a[1] && mask[k + c]) other = c;
  }
  ASSERT_GE(other, 0);
  a[1] = other;
  StepResult s = env->step(a);
  EXPECT_TRUE(s.truncated);
  EXPECT_FALSE(s.info.measurement.ok);
  EXPECT_NE(s.info.error.find("step 0: block 1 asks for " + catalog.at(other).to_string()),
            std::string::npos)
      << s.info.error;
  EXPECT_NE(s.info.error.find("the recording has"), std::string::npos) << s.info.error;
  EXPECT_THROW(env->step(recorded_[0].actions[0]), std::logic_error) << "episode over";
  // reset() replays from the start again.
  env->reset(5);
  EXPECT_TRUE(env->step(recorded_[0].actions[0]).info.error.empty());
}

TEST_F(Replay, SeedSelectionEstimateAndClone) {
  ReplayRun run(spec_, path_);
  EXPECT_EQ(run.num_episodes(), 2);
  run.reset(6, recorded_[1].reset.info.plan);
  EXPECT_EQ(run.episode().info.seed, 6u);
  run.reset(9, recorded_[0].reset.info.plan);  // not recorded: 9 mod 2 = episode 1
  EXPECT_EQ(run.episode().info.seed, 6u);
  run.reset(5, recorded_[0].reset.info.plan);
  const Plan initial = recorded_[0].reset.info.plan;
  ASSERT_TRUE(run.estimate(initial).has_value());
  EXPECT_EQ(run.estimate(initial)->step_latency_s,
            recorded_[0].reset.info.measurement.step_latency_s);
  EXPECT_TRUE(run.cloneable());
  Measurement ref = run.step(initial);  // the reference iteration
  ASSERT_TRUE(ref.ok) << ref.error;
  std::unique_ptr<TrainingRun> copy = run.clone();
  const Plan next = recorded_[0].steps[0].info.plan;
  ASSERT_TRUE(run.estimate(next).has_value());
  EXPECT_EQ(run.estimate(next)->step_latency_s,
            recorded_[0].steps[0].info.measurement.step_latency_s);
  EXPECT_TRUE(run.step(next).ok);
  EXPECT_TRUE(copy->step(next).ok) << "the clone has its own cursor";
  EXPECT_EQ(copy->context().step, 2);
  EXPECT_EQ(run.action_mask(0), run.catalog().shape_mask(BlockKind::kAttention));
}

TEST_F(Replay, SpecMustMatchTheTrace) {
  ExperimentSpec wider = spec_;
  wider.model = test_specs::tiny_model(/*layers=*/3);
  try {
    ReplayRun run(wider, path_);
    FAIL() << "a 6-block spec accepted a 4-block trace";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4 blocks on 4 ranks, the spec has 6 blocks"),
              std::string::npos)
        << e.what();
  }
  ExperimentSpec no_trace = spec_;
  no_trace.replay_trace.clear();
  EXPECT_THROW(make_bare_env(kReplay, no_trace), std::invalid_argument);
  ExperimentSpec missing = spec_;
  missing.replay_trace = path_ + ".absent";
  EXPECT_THROW(make_bare_env(kReplay, missing), std::runtime_error);
}

// The check at config load (validate_env_spec, as the loader and Python's make run it): a
// config whose env observes another width than the trace recorded (here one more link class)
// is refused, naming the episode; the recording's own config passes.
TEST_F(Replay, ObservationWidthMustMatchTheConfig) {
  ExperimentSpec same = spec_;
  same.env_id = kReplay;
  EXPECT_NO_THROW(validate_env_spec(same));
  ExperimentSpec more = same;
  more.cluster.links.push_back({"extra", 1e10, 1e-6, 1e-11});
  try {
    validate_env_spec(more);
    FAIL() << "a config with another observation width accepted the trace";
  } catch (const EnvOptionError& e) {
    EXPECT_NE(std::string(e.what()).find("observations of width"), std::string::npos)
        << e.what();
  }
}

TEST_F(Replay, StandardStackNormalisesAgainstTheRecordedReference) {
  spec_.steps_per_episode = kSteps;
  std::unique_ptr<Env> env = make_env(kReplay, spec_);
  env->reset(5);
  for (int t = 0; t < kSteps; ++t) {
    StepResult s = env->step(recorded_[0].actions[t]);
    ASSERT_TRUE(s.info.error.empty()) << s.info.error;
    EXPECT_GT(s.reward, 0) << "normalised rewards are ratios";
    EXPECT_EQ(s.truncated, t == kSteps - 1);
  }
}

// The conformance checks that hold for a replay. Random masked actions leave the recording
// at once, so such episodes end after one truncated step (which the suite allows); the time
// limit and make_env checks, which need random actions to succeed, do not apply.
TEST_F(Replay, Conformance) {
  const envtest::EnvMaker make = envtest::registry_maker(kReplay);
  {
    SCOPED_TRACE("spaces");
    auto env = make(spec_);
    envtest::check_spaces(*env, 5);
  }
  envtest::check_seed_determinism(make, spec_, 5, 10);
  {
    auto env = make(spec_);
    envtest::check_random_rollouts(*env, 5, 2, 10);
  }
  {
    auto env = make(spec_);
    envtest::check_mask_enforced(*env, 5);
  }
}

}  // namespace
}  // namespace shardgym
