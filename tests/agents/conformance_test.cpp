// The agent conformance suite: every registered agent (OpenSpiel's basic_tests.h for agents)
//   - acts within the mask, episode after episode, learning on;
//   - is deterministic: the same seed on the same env gives the same actions;
//   - round-trips save/load: a fresh agent that loads the file acts as the original does.
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

using agent_tests::Rollout;
using agent_tests::rollout;

// Learners get small rollouts here so that their update() runs within the test's episodes.
std::string test_id(const std::string& name) {
  if (name == "ppo") return "ppo(rollout=8,minibatches=2,epochs=2,hidden=16)";
  if (name == "random-search") return "random-search(budget=4)";
  return name;
}

ExperimentSpec conformance_spec() {
  ExperimentSpec s = agent_tests::sim_spec(/*layers=*/2, /*steps=*/10);
  s.scenario.noise = 0.05;
  return s;
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#ifndef SHARDGYM_TEST_WITH_PPO
    if (GetParam() == "ppo") GTEST_SKIP() << "ppo needs LibTorch (SHARDGYM_WITH_TORCH=OFF)";
#endif
  }
  std::string path(const std::string& tag) const {
    std::string n = GetParam() + "_" + tag + ".agent";
    return (std::filesystem::temp_directory_path() /
            ("shardgym_conformance_" + std::to_string(::getpid()) + "_" + n))
        .string();
  }
};

TEST_P(Conformance, RespectsTheMask) {
  auto env = agent_tests::sim_env(conformance_spec());
  auto agent = make_agent(test_id(GetParam()), env->spec(), 1);
  Rollout r = rollout(*env, *agent, 0, /*episodes=*/3, /*learn=*/true);
  EXPECT_EQ(r.invalid, 0);
  EXPECT_EQ(r.actions.size(), 30u);
}

// The plan in force comes as catalog indices, -1 where a block's strategy is outside the
// catalog (a config's initial plan may be): no agent acts outside the mask or indexes with -1.
TEST_P(Conformance, ActsWithinTheMaskWhereThePlanInForceIsOutsideTheCatalog) {
  auto env = agent_tests::sim_env(conformance_spec());
  auto agent = make_agent(test_id(GetParam()), env->spec(), 1);
  const ResetResult start = env->reset(0);
  agent->begin_episode(*env);
  const std::vector<uint8_t> mask = env->action_mask();
  const std::vector<int32_t> outside(env->spec().num_blocks, -1);
  for (int i = 0; i < 3; ++i) {
    const Action a = agent->act(start.obs, mask, outside);
    EXPECT_TRUE(agents_detail::action_allowed(a, mask, env->spec().catalog_size)) << i;
    agent->observe({start.obs, a, 1.0, start.obs, false, false, false});
  }
}

TEST_P(Conformance, DeterministicUnderASeed) {
  auto env_a = agent_tests::sim_env(conformance_spec());
  auto env_b = agent_tests::sim_env(conformance_spec());
  auto a = make_agent(test_id(GetParam()), env_a->spec(), 42);
  auto b = make_agent(test_id(GetParam()), env_b->spec(), 42);
  Rollout ra = rollout(*env_a, *a, 5, 2, true);
  Rollout rb = rollout(*env_b, *b, 5, 2, true);
  EXPECT_EQ(ra.actions, rb.actions);
  EXPECT_EQ(ra.rewards, rb.rewards);
}

TEST_P(Conformance, SaveLoadRoundTrip) {
  auto env = agent_tests::sim_env(conformance_spec());
  auto original = make_agent(test_id(GetParam()), env->spec(), 7);
  rollout(*env, *original, 0, 2, true);  // some history: incumbents, rng, parameters
  const std::string file = path("roundtrip");
  original->save(file);
  auto restored = make_agent(test_id(GetParam()), env->spec(), 12345);
  restored->load(file);
  std::remove(file.c_str());
  auto env_a = agent_tests::sim_env(conformance_spec());
  auto env_b = agent_tests::sim_env(conformance_spec());
  Rollout ra = rollout(*env_a, *original, 3, 2, true);
  Rollout rb = rollout(*env_b, *restored, 3, 2, true);
  EXPECT_EQ(ra.actions, rb.actions);
}

TEST_P(Conformance, LoadRejectsAnotherAgentsFile) {
  auto env = agent_tests::sim_env(conformance_spec());
  const std::string other = GetParam() == "random" ? "dp" : "random";
  auto a = make_agent(test_id(other), env->spec(), 0);
  const std::string file = path("other");
  a->save(file);
  auto b = make_agent(test_id(GetParam()), env->spec(), 0);
  EXPECT_THROW(b->load(file), std::runtime_error);
  std::remove(file.c_str());
  EXPECT_THROW(b->load(file), std::runtime_error);  // missing file
}

INSTANTIATE_TEST_SUITE_P(Registered, Conformance, ::testing::ValuesIn(registered_agent_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace shardgym
