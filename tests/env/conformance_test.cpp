// Every registered env through the shared conformance suite (one test per id, registered at
// run time so that envs added later are covered), plus the list of ids that must exist.
// The replay env plays back a trace of the simulator recorded here and follows it.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <stdexcept>

#include "datasets/replay_run.h"
#include "datasets/trace_writer.h"
#include "env/partition_env.h"
#include "env/registry.h"
#include "env/wrappers.h"
#include "tests/env/conformance.h"
#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

// FakeRun-backed envs: the suite runs even where no backend is linked, and the "live"-like
// one exercises the non-deterministic path (no bit-identity check, platform-dependent obs).
std::unique_ptr<Env> make_fake_sim(const ExperimentSpec& spec) {
  envtest::FakeRunOptions o;
  o.noise = 0.05;
  return std::make_unique<PartitionEnv>("test/FakeSim-v0",
                                        std::make_unique<envtest::FakeRun>(spec, o), spec);
}
std::unique_ptr<Env> make_fake_timed(const ExperimentSpec& spec) {
  envtest::FakeRunOptions o;
  o.backend = "live";
  o.deterministic = false;
  o.can_estimate = false;
  o.noise = 0.05;
  return std::make_unique<PartitionEnv>("test/FakeTimed-v0",
                                        std::make_unique<envtest::FakeRun>(spec, o), spec);
}
EnvType fake_type(const char* id, const char* description, EnvFactory factory, bool live) {
  EnvType t{id, description, std::move(factory)};
  t.flags.deterministic = !live;
  t.flags.platform_dependent = live;
  return t;
}
REGISTER_SHARDGYM_ENV(fake_type("test/FakeSim-v0", "FakeRun with noise (conformance self-test)",
                                make_fake_sim, false));
REGISTER_SHARDGYM_ENV(fake_type("test/FakeTimed-v0", "FakeRun acting as a live run",
                                make_fake_timed, true));

TEST(EnvIds, RequiredIdsAreRegistered) {
  const std::vector<std::string> ids = registered_env_ids();
  // TPLive-v0 exists only in builds with LibTorch.
  for (const char* required : {"shardgym/TPSim-v0", "shardgym/TPReplay-v0"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), required), ids.end())
        << required << " is not registered; registered: " << ::testing::PrintToString(ids);
  }
}

// ---- The suite must catch broken envs (a suite that cannot fail checks nothing).

// Failures reported by `body`, kept away from the running test.
int failures_of(const std::function<void()>& body) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    body();
  }
  int failed = 0;
  for (int i = 0; i < results.size(); ++i) failed += results.GetTestPartResult(i).failed();
  return failed;
}

// Replaces a rejected action by the plan in force instead of throwing.
class SwallowsBadActions : public Wrapper {
 public:
  using Wrapper::Wrapper;
  void step_into(const Action& a, StepResult& out) override {
    try {
      inner_->step_into(a, out);
    } catch (const std::invalid_argument&) {
      auto& env = dynamic_cast<PartitionEnv&>(*inner_);
      inner_->step_into(env.action_from_plan(run().plan()), out);
    }
  }
};

// Claims determinism but drifts from one instance to the next.
class Drifts : public Wrapper {
 public:
  using Wrapper::Wrapper;
  void step_into(const Action& a, StepResult& out) override {
    static int calls = 0;
    inner_->step_into(a, out);
    out.reward += 1e-9 * ++calls;
  }
};

// Reports failed steps without truncating.
class HidesFailures : public Wrapper {
 public:
  using Wrapper::Wrapper;
  void step_into(const Action& a, StepResult& out) override {
    inner_->step_into(a, out);
    out.truncated = false;
  }
};

template <typename W>
envtest::EnvMaker broken(envtest::FakeRunOptions options = {}) {
  return [options](const ExperimentSpec& spec) -> std::unique_ptr<Env> {
    auto env = std::make_unique<PartitionEnv>(
        "test/Broken-v0", std::make_unique<envtest::FakeRun>(spec, options), spec);
    return std::make_unique<W>(std::move(env));
  };
}

TEST(ConformanceSuite, CatchesRegistrationFlagsThatAreNotTheEnvs) {
  const ExperimentSpec spec = test_specs::tiny();
  auto env = broken<Wrapper>()(spec);  // deterministic, not platform-dependent
  EnvFlags flags;
  EXPECT_EQ(failures_of([&] { envtest::check_registration_flags(flags, *env); }), 0);
  flags.deterministic = false;
  EXPECT_EQ(failures_of([&] { envtest::check_registration_flags(flags, *env); }), 1);
  flags.deterministic = true;
  flags.platform_dependent = true;
  EXPECT_EQ(failures_of([&] { envtest::check_registration_flags(flags, *env); }), 1);
}

TEST(ConformanceSuite, PassesAHealthyEnvAndCatchesBrokenOnes) {
  const ExperimentSpec spec = test_specs::tiny();
  envtest::FakeRunOptions tight;
  tight.capacity = 7e9;  // some entries are masked for memory, not only for shape
  EXPECT_EQ(failures_of([&] { envtest::check_env_conformance(broken<Wrapper>(tight), spec); }),
            0);
  EXPECT_GT(failures_of([&] {
              auto env = broken<SwallowsBadActions>(tight)(spec);
              envtest::check_mask_enforced(*env, 1);
            }),
            0);
  EXPECT_GT(failures_of([&] { envtest::check_seed_determinism(broken<Drifts>(), spec, 1, 5); }),
            0);
  envtest::FakeRunOptions failing;
  failing.fail_at_step = 3;
  EXPECT_GT(failures_of([&] {
              auto env = broken<HidesFailures>(failing)(spec);
              envtest::check_random_rollouts(*env, 1, 1, 5);
            }),
            0);
}

// ---- Registered envs.

// A replay follows its recording: the recorded next plan, else (past the end) anything.
Action follow_recording(Env& env, std::mt19937_64& rng) {
  const auto* replay = dynamic_cast<const ReplayRun*>(&env.run());
  const std::optional<Plan> next = replay ? replay->next_plan() : std::nullopt;
  if (!next) return envtest::random_masked_action(env, rng);
  Action a(next->size());
  for (int b = 0; b < next->size(); ++b) a[b] = env.run().catalog().index_of(next->blocks[b]);
  return a;
}

// Records episodes of the simulator (seeds 7, 8, 9; 8 random masked steps each) to `path`.
void record_sim_trace(ExperimentSpec spec, const std::string& path) {
  spec.env_id = "shardgym/TPSim-v0";
  auto writer = std::make_shared<TraceWriter>(path, make_trace_metadata(spec, "test"));
  {
    RecordTrace env(std::make_unique<TimeLimit>(make_bare_env(spec.env_id, spec), 8), writer);
    std::mt19937_64 rng(1);
    for (uint64_t seed = 7; seed <= 9; ++seed) {
      env.reset(seed);
      while (!env.step(envtest::random_masked_action(env, rng)).truncated) {
      }
    }
  }
  writer->close();
}

class EnvConformance : public ::testing::Test {
 public:
  explicit EnvConformance(std::string id) : id_(std::move(id)) {}

  void TestBody() override {
    ExperimentSpec spec = envtest::conformance_spec(id_);
    envtest::ConformanceOptions options;
    options.check_make_env = true;
    options.id = id_;
    const EnvFlags& flags = env_type(id_).flags;
    if (flags.needs_trace) {
      if (!env_registered("shardgym/TPSim-v0")) {
        GTEST_SKIP() << "recording a trace to replay needs shardgym/TPSim-v0";
      }
      spec.replay_trace = ::testing::TempDir() + "shardgym_env_conformance_replay.h5";
      ASSERT_NO_THROW(record_sim_trace(spec, spec.replay_trace));
      options.policy = follow_recording;
    }
    if (flags.real_run) {  // real training steps: fewer of them
      options.rollout_episodes = 1;
      options.rollout_steps = 6;
    }
    try {
      std::unique_ptr<Env> env = make_bare_env(id_, spec);
      env->reset(options.seed);
      // The registration's flags are what users and this suite rely on: they must be the env's.
      envtest::check_registration_flags(flags, *env);
    } catch (const std::exception& e) {
      if (flags.real_run) {
        GTEST_SKIP() << id_ << ": the live backend cannot start here: " << e.what();
      }
      FAIL() << id_ << " cannot be built and reset from the small spec: " << e.what();
    }
    envtest::check_env_conformance(envtest::registry_maker(id_), spec, options);
  }

 private:
  std::string id_;
};

std::string test_name(const std::string& id) {
  std::string name = id;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace
}  // namespace shardgym

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (const std::string& id : shardgym::registered_env_ids()) {
    ::testing::RegisterTest("EnvConformance", shardgym::test_name(id).c_str(), nullptr,
                            id.c_str(), __FILE__, __LINE__,
                            [id]() -> ::testing::Test* {
                              return new shardgym::EnvConformance(id);
                            });
  }
  return RUN_ALL_TESTS();
}
