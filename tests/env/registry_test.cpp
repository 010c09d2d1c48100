#include "env/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "env/partition_env.h"
#include "env/wrappers.h"
#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

std::unique_ptr<Env> make_fake(const ExperimentSpec& spec) {
  return std::make_unique<PartitionEnv>("test/RegistryFake-v0",
                                        std::make_unique<envtest::FakeRun>(spec), spec);
}

REGISTER_SHARDGYM_ENV("test/RegistryFake-v0", "FakeRun for the registry test", make_fake);
REGISTER_SHARDGYM_ENV("test/AnotherFake-v0", "a second id, to check the order", make_fake);

TEST(EnvRegistry, ListsRegisteredIdsSorted) {
  const std::vector<std::string> ids = registered_env_ids();
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_NE(std::find(ids.begin(), ids.end(), "test/RegistryFake-v0"), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), "test/AnotherFake-v0"), ids.end());
  EXPECT_TRUE(env_registered("test/RegistryFake-v0"));
  EXPECT_FALSE(env_registered("test/Nope-v0"));
  EXPECT_EQ(env_description("test/RegistryFake-v0"), "FakeRun for the registry test");
}

TEST(EnvRegistry, UnknownIdsNameTheKnownOnes) {
  try {
    make_bare_env("test/Nope-v0", test_specs::tiny());
    FAIL() << "an unknown id must throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test/Nope-v0"), std::string::npos) << what;
    EXPECT_NE(what.find("test/AnotherFake-v0, "), std::string::npos) << what;
    EXPECT_NE(what.find("test/RegistryFake-v0"), std::string::npos) << what;
  }
  EXPECT_THROW(env_description("test/Nope-v0"), std::invalid_argument);
}

TEST(EnvRegistry, DuplicateRegistrationIsRefused) {
  EXPECT_THROW(EnvRegistration("test/RegistryFake-v0", "again", make_fake), std::logic_error);
  EXPECT_THROW(EnvRegistration("", "empty", make_fake), std::logic_error);
}

TEST(EnvRegistry, MakeEnvBuildsTheStandardStack) {
  ExperimentSpec spec = test_specs::tiny();
  spec.steps_per_episode = 7;
  std::unique_ptr<Env> env = make_env("test/RegistryFake-v0", spec);
  auto* limit = dynamic_cast<TimeLimit*>(env.get());
  ASSERT_NE(limit, nullptr) << "TimeLimit outermost";
  EXPECT_EQ(env->spec().max_episode_steps, 7);
  auto* normalize = dynamic_cast<NormalizeReward*>(&limit->inner());
  ASSERT_NE(normalize, nullptr);
  EXPECT_NE(dynamic_cast<PartitionEnv*>(&normalize->inner()), nullptr);
  env->reset(0);
  const Action megatron(4, 3);
  EXPECT_DOUBLE_EQ(env->step(megatron).reward, 1.0) << "normalised against Megatron";

  spec.reward.normalize = false;
  spec.steps_per_episode = 0;
  std::unique_ptr<Env> bare = make_env("test/RegistryFake-v0", spec);
  EXPECT_NE(dynamic_cast<PartitionEnv*>(bare.get()), nullptr);
  EXPECT_NE(dynamic_cast<PartitionEnv*>(make_bare_env("test/RegistryFake-v0", spec).get()),
            nullptr);
}

}  // namespace
}  // namespace shardgym
