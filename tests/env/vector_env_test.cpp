#include "env/vector_env.h"

#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "env/partition_env.h"
#include "env/wrappers.h"
#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

using envtest::FakeRun;
using envtest::FakeRunOptions;

// Env i: noisy FakeRun, truncated after 3 + i steps, so envs end at different times.
std::unique_ptr<Env> make_env_i(int i) {
  const ExperimentSpec spec = test_specs::tiny();
  FakeRunOptions options;
  options.noise = 0.1;
  auto env = std::make_unique<PartitionEnv>("test/Fake-v0",
                                            std::make_unique<FakeRun>(spec, options), spec);
  return std::make_unique<TimeLimit>(std::move(env), 3 + i);
}

std::vector<Action> random_actions(const std::vector<std::vector<uint8_t>>& masks,
                                   const Space& space, std::mt19937_64& rng) {
  std::vector<Action> actions;
  for (const auto& m : masks) actions.push_back(space.sample(rng, &m));
  return actions;
}

TEST(VectorEnv, MatchesSteppingTheEnvsOneAfterAnother) {
  constexpr int kN = 4, kSteps = 12;
  VectorEnv vec(kN, make_env_i, /*threads=*/3);
  std::vector<std::unique_ptr<Env>> serial;
  for (int i = 0; i < kN; ++i) serial.push_back(make_env_i(i));

  std::vector<std::vector<int32_t>> plans;
  const std::vector<Observation> obs = vec.reset(100, &plans);
  for (int i = 0; i < kN; ++i) {
    const ResetResult r = serial[i]->reset(100 + i);
    EXPECT_EQ(obs[i], r.obs);
    EXPECT_EQ(plans[i], r.info.plan_indices);
    EXPECT_EQ(plans[i].size(), static_cast<size_t>(vec.spec().num_blocks));
  }

  std::mt19937_64 rng(5);
  int ended = 0;
  for (int t = 0; t < kSteps; ++t) {
    const auto masks = vec.action_masks();
    const std::vector<Action> actions = random_actions(masks, vec.spec().action_space, rng);
    const VectorStep v = vec.step(actions);
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(masks[i], serial[i]->action_mask());
      StepResult s = serial[i]->step(actions[i]);
      EXPECT_EQ(v.rewards[i], s.reward) << "env " << i << " step " << t;
      EXPECT_EQ(v.truncated[i], s.truncated ? 1 : 0);
      EXPECT_EQ(v.terminated[i], 0);
      EXPECT_EQ(v.infos[i].plan, s.info.plan);
      if (s.truncated) {
        ++ended;
        EXPECT_EQ(v.final_obs[i], s.obs);
        const ResetResult again = serial[i]->reset();
        EXPECT_EQ(v.obs[i], again.obs) << "autoreset continues the seed sequence";
        EXPECT_EQ(v.plans[i], again.info.plan_indices) << "the plan in force for obs: the reset's";
      } else {
        EXPECT_TRUE(v.final_obs[i].empty());
        EXPECT_EQ(v.obs[i], s.obs);
        EXPECT_EQ(v.plans[i], s.info.plan_indices);
      }
    }
  }
  EXPECT_GE(ended, kN) << "every env should have ended at least once in 12 steps";
}

// step_into / reset_into write the same results as step / reset into flat buffers.
TEST(VectorEnv, StepIntoMatchesStep) {
  constexpr int kN = 3, kSteps = 10;
  VectorEnv flat(kN, make_env_i, /*threads=*/2);
  VectorEnv ref(kN, make_env_i, /*threads=*/1);
  const int64_t d = flat.observation_size(), m = flat.mask_size();
  const int b = flat.spec().num_blocks, a = flat.action_size();
  std::vector<float> obs(kN * d), final_obs(kN * d, -7.0f);
  std::vector<int32_t> plan(kN * b), final_plan(kN * b, -7);
  std::vector<uint8_t> mask(kN * m), terminated(kN), truncated(kN);
  std::vector<double> reward(kN);
  std::vector<std::string> errors;
  VectorBuffers out;
  out.obs = obs.data(), out.plan = plan.data(), out.mask = mask.data();
  out.reward = reward.data(), out.terminated = terminated.data(), out.truncated = truncated.data();
  out.final_obs = final_obs.data(), out.final_plan = final_plan.data(), out.errors = &errors;

  flat.reset_into(100, out);
  const std::vector<Observation> first = ref.reset(100);
  ASSERT_EQ(m, static_cast<int64_t>(ref.action_masks().front().size()));
  auto expect_rows = [&](const std::vector<Observation>& o, int t) {
    const auto masks = ref.action_masks();
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(Observation(obs.begin() + i * d, obs.begin() + (i + 1) * d), o[i])
          << "env " << i << " step " << t;
      EXPECT_EQ(std::vector<uint8_t>(mask.begin() + i * m, mask.begin() + (i + 1) * m), masks[i]);
      const Plan& p = ref.env(i).run().plan();
      for (int k = 0; k < b; ++k) {
        EXPECT_EQ(plan[i * b + k], ref.env(i).run().catalog().index_of(p.blocks[k]));
      }
    }
  };
  expect_rows(first, -1);

  std::mt19937_64 rng(9);
  int ended = 0;
  for (int t = 0; t < kSteps; ++t) {
    const std::vector<Action> actions =
        random_actions(ref.action_masks(), ref.spec().action_space, rng);
    std::vector<int32_t> packed;
    for (const Action& act : actions) packed.insert(packed.end(), act.begin(), act.end());
    ASSERT_EQ(static_cast<int>(packed.size()), kN * a);
    std::fill(final_obs.begin(), final_obs.end(), -7.0f);
    std::fill(final_plan.begin(), final_plan.end(), -7);
    flat.step_into(packed.data(), out);
    const VectorStep v = ref.step(actions);
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(reward[i], v.rewards[i]);
      EXPECT_EQ(truncated[i], v.truncated[i]);
      EXPECT_EQ(terminated[i], v.terminated[i]);
      EXPECT_EQ(errors.at(i), v.infos[i].error);
      const Observation fin(final_obs.begin() + i * d, final_obs.begin() + (i + 1) * d);
      if (v.truncated[i]) {
        ++ended;
        EXPECT_EQ(fin, v.final_obs[i]);
        EXPECT_EQ(
            std::vector<int32_t>(final_plan.begin() + i * b, final_plan.begin() + (i + 1) * b),
            v.infos[i].plan_indices);
      } else {
        EXPECT_EQ(fin, Observation(d, -7.0f)) << "rows of envs that did not end stay untouched";
      }
    }
    expect_rows(v.obs, t);
  }
  EXPECT_GE(ended, kN);
}

TEST(VectorEnv, RethrowsAnEnvsErrorAfterTheOthersStepped) {
  VectorEnv vec(3, make_env_i, 2);
  vec.reset(0);
  std::vector<Action> actions(3, Action(4, 3));
  actions[1] = Action(4, 999);
  EXPECT_THROW(vec.step(actions), std::invalid_argument);
  EXPECT_EQ(vec.env(0).elapsed_steps(), 1);
  EXPECT_EQ(vec.env(1).elapsed_steps(), 0);
  EXPECT_EQ(vec.env(2).elapsed_steps(), 1);
  EXPECT_THROW(vec.step({Action(4, 3)}), std::invalid_argument) << "one action per env";
}

TEST(VectorEnv, RejectsBadConstruction) {
  EXPECT_THROW(VectorEnv(0, make_env_i), std::invalid_argument);
  EXPECT_THROW(VectorEnv(2, [](int) { return std::unique_ptr<Env>(); }), std::invalid_argument);
  EXPECT_THROW(VectorEnv(2,
                         [](int i) {
                           ExperimentSpec spec = test_specs::tiny(/*layers=*/1 + i);
                           return std::unique_ptr<Env>(std::make_unique<PartitionEnv>(
                               "x", std::make_unique<FakeRun>(spec), spec));
                         }),
               std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
