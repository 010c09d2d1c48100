#include "tests/env/conformance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "env/registry.h"
#include "env/wrappers.h"
#include "runtime/core/training_run.h"
#include "tests/env/test_specs.h"

namespace shardgym::envtest {

Action random_masked_action(Env& env, std::mt19937_64& rng) {
  const std::vector<uint8_t> mask = env.action_mask();
  return env.spec().action_space.sample(rng, &mask);
}

namespace {

bool same_bits(const Observation& a, const Observation& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Episode {
  std::vector<Observation> obs;
  std::vector<double> rewards;
  std::vector<Action> actions;
  int end_step = -1;  // step at which the episode ended (truncated), -1 if it ran on
};

Episode play(Env& env, uint64_t seed, int steps, const Policy& policy) {
  Episode e;
  std::mt19937_64 rng(seed);
  e.obs.push_back(env.reset(seed).obs);
  for (int i = 0; i < steps; ++i) {
    Action a = policy(env, rng);
    StepResult r = env.step(a);
    e.actions.push_back(a);
    e.obs.push_back(r.obs);
    e.rewards.push_back(r.reward);
    if (r.terminated || r.truncated) {
      e.end_step = i + 1;
      break;
    }
  }
  return e;
}

void expect_same_episode(const Episode& a, const Episode& b, const std::string& what) {
  ASSERT_EQ(a.obs.size(), b.obs.size()) << what << ": episode lengths differ";
  EXPECT_EQ(a.end_step, b.end_step) << what;
  for (size_t i = 0; i < a.obs.size(); ++i) {
    EXPECT_TRUE(same_bits(a.obs[i], b.obs[i])) << what << ": observation " << i << " differs";
  }
  for (size_t i = 0; i < a.rewards.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.rewards[i], &b.rewards[i], sizeof(double)), 0)
        << what << ": reward " << i << " differs (" << a.rewards[i] << " vs " << b.rewards[i]
        << ")";
    EXPECT_EQ(a.actions[i], b.actions[i]) << what << ": action " << i << " differs";
  }
}

}  // namespace

EnvMaker registry_maker(const std::string& id) {
  return [id](const ExperimentSpec& spec) { return make_bare_env(id, spec); };
}

void check_registration_flags(const EnvFlags& flags, Env& env) {
  const EnvSpec& s = env.spec();
  EXPECT_EQ(flags.deterministic, s.deterministic) << s.id << ": registration flag deterministic";
  EXPECT_EQ(flags.platform_dependent, s.observation_space.platform_dependent)
      << s.id << ": registration flag platform_dependent";
}

ExperimentSpec conformance_spec(const std::string& id) {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4);
  if (env_registered(id) && env_type(id).flags.real_run) {  // real ranks here: smaller still
    spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/2);
    spec.model.hidden = 32;
    spec.model.seq = 16;
    spec.model.global_batch = 8;
  }
  spec.env_id = id;
  return spec;
}

void check_spaces(Env& env, uint64_t seed, const Policy& policy) {
  const EnvSpec& s = env.spec();
  ResetResult r = env.reset(seed);
  EXPECT_FALSE(s.id.empty());
  EXPECT_EQ(s.backend, env.run().backend());
  EXPECT_EQ(s.deterministic, env.run().deterministic());
  EXPECT_EQ(s.observation_space.kind, SpaceKind::kBox);
  EXPECT_EQ(s.observation_space.dtype, "float32");
  EXPECT_EQ(s.observation_space.deterministic, s.deterministic);
  EXPECT_EQ(s.observation_space.platform_dependent, s.backend == "live");
  ASSERT_EQ(static_cast<int64_t>(r.obs.size()), s.observation_space.flat_size());
  EXPECT_TRUE(s.observation_space.contains(r.obs)) << s.observation_space.to_string();

  const int blocks = env.run().model().num_blocks();
  const int k = env.run().catalog().size();
  EXPECT_EQ(s.num_blocks, blocks);
  EXPECT_EQ(s.catalog_size, k);
  EXPECT_EQ(r.info.plan.size(), blocks);
  EXPECT_TRUE(r.info.error.empty()) << r.info.error;
  EXPECT_EQ(env.elapsed_steps(), 0);
  if (s.action_space.kind == SpaceKind::kMultiDiscrete) {
    // B block components of K choices, then at most one plan-level component (pipeline moves,
    // data shares) whose choice 0 (keep) is always allowed.
    const size_t components = s.action_space.nvec.size();
    ASSERT_TRUE(components == static_cast<size_t>(blocks) || components == size_t(blocks) + 1)
        << components << " components for " << blocks << " blocks";
    for (int b = 0; b < blocks; ++b) EXPECT_EQ(s.action_space.nvec[b], k);
    const size_t tail = components > size_t(blocks) ? size_t(s.action_space.nvec.back()) : 0;
    const std::vector<uint8_t> mask = env.action_mask();
    ASSERT_EQ(mask.size(), static_cast<size_t>(blocks) * k + tail);
    if (tail > 0) {
      EXPECT_EQ(mask[static_cast<size_t>(blocks) * k], 1) << "keep is masked";
    }
    for (int b = 0; b < blocks; ++b) {
      int allowed = 0;
      for (int c = 0; c < k; ++c) allowed += mask[b * k + c];
      EXPECT_GT(allowed, 0) << "block " << b << " has no allowed strategy after reset";
    }
  } else {
    ASSERT_EQ(s.action_space.kind, SpaceKind::kDiscrete) << s.action_space.to_string();
    EXPECT_EQ(env.action_mask().size(), static_cast<size_t>(s.action_space.nvec.at(0)));
  }
  std::mt19937_64 rng(seed);
  const Action a = policy(env, rng);
  EXPECT_TRUE(s.action_space.contains(a));
  StepResult step = env.step(a);
  EXPECT_EQ(static_cast<int64_t>(step.obs.size()), s.observation_space.flat_size());
  EXPECT_TRUE(s.observation_space.contains(step.obs));
  EXPECT_EQ(env.elapsed_steps(), 1);
}

void check_seed_determinism(const EnvMaker& make, const ExperimentSpec& spec, uint64_t seed,
                            int steps, const Policy& policy) {
  std::unique_ptr<Env> first = make(spec);
  if (!first->spec().deterministic) return;  // live timings: nothing to compare bit by bit
  std::unique_ptr<Env> second = make(spec);
  const Episode a = play(*first, seed, steps, policy);
  const Episode b = play(*second, seed, steps, policy);
  expect_same_episode(a, b, "two instances, seed " + std::to_string(seed));
  play(*first, seed + 1, steps / 2, policy);  // an episode in between must not leak
  const Episode c = play(*first, seed, steps, policy);
  expect_same_episode(a, c, "same instance reset again, seed " + std::to_string(seed));
}

void check_random_rollouts(Env& env, uint64_t seed, int episodes, int steps,
                           const Policy& policy) {
  std::mt19937_64 rng(seed);
  const Space& obs_space = env.spec().observation_space;
  for (int e = 0; e < episodes; ++e) {
    ResetResult r = env.reset(seed + e);
    ASSERT_TRUE(obs_space.contains(r.obs));
    for (int i = 0; i < steps; ++i) {
      Action a;
      StepResult s;
      ASSERT_NO_THROW(a = policy(env, rng)) << "episode " << e << " step " << i;
      ASSERT_NO_THROW(s = env.step(a)) << "episode " << e << " step " << i;
      EXPECT_TRUE(obs_space.contains(s.obs)) << "episode " << e << " step " << i;
      EXPECT_TRUE(std::isfinite(s.reward)) << "episode " << e << " step " << i;
      EXPECT_EQ(env.elapsed_steps(), i + 1);
      EXPECT_EQ(s.info.plan.size(), env.spec().num_blocks);
      EXPECT_FALSE(s.terminated) << "tasks are continuing: only truncation ends an episode";
      if (!s.info.error.empty()) {
        EXPECT_TRUE(s.truncated) << "a failed step must truncate: " << s.info.error;
      }
      if (s.terminated || s.truncated) break;
    }
  }
}

void check_mask_enforced(Env& env, uint64_t seed, const Policy& policy) {
  env.reset(seed);
  std::mt19937_64 rng(seed);
  const Space& space = env.spec().action_space;
  const Action good = policy(env, rng);
  if (space.kind == SpaceKind::kMultiDiscrete) {
    const int k = static_cast<int>(space.nvec.front());
    const std::vector<uint8_t> mask = env.action_mask();
    const auto masked = std::find(mask.begin(), mask.end(), 0);
    if (masked != mask.end()) {  // a catalog usually has shape-invalid entries somewhere
      const int flat = static_cast<int>(masked - mask.begin());
      const int b = flat / k, c = flat % k;
      Action bad = good;
      bad[b] = c;
      try {
        env.step(bad);
        ADD_FAILURE() << "masked action (block " << b << ", index " << c << ") was accepted";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("block " + std::to_string(b)), std::string::npos)
            << "the error should name the block: " << e.what();
      }
    }
    Action out_of_range = good;
    out_of_range.back() = k;
    EXPECT_THROW(env.step(out_of_range), std::invalid_argument);
    out_of_range.back() = -1;
    EXPECT_THROW(env.step(out_of_range), std::invalid_argument);
  } else {
    EXPECT_THROW(env.step({static_cast<int32_t>(space.nvec.at(0))}), std::invalid_argument);
  }
  Action too_long = good;
  too_long.push_back(0);
  EXPECT_THROW(env.step(too_long), std::invalid_argument);
  EXPECT_THROW(env.step(Action{}), std::invalid_argument);
  EXPECT_EQ(env.elapsed_steps(), 0) << "a rejected action must not count as a step";
  StepResult r = env.step(good);
  EXPECT_EQ(env.elapsed_steps(), 1);
  EXPECT_TRUE(env.spec().observation_space.contains(r.obs));
}

void check_time_limit(const EnvMaker& make, const ExperimentSpec& spec, int max_steps,
                      uint64_t seed, const Policy& policy) {
  TimeLimit env(make(spec), max_steps);
  EXPECT_EQ(env.spec().max_episode_steps, max_steps);
  std::mt19937_64 rng(seed);
  for (int episode = 0; episode < 2; ++episode) {
    ResetResult r = env.reset(seed + episode);
    EXPECT_TRUE(env.spec().observation_space.contains(r.obs));
    for (int i = 1; i <= max_steps; ++i) {
      StepResult s = env.step(policy(env, rng));
      ASSERT_TRUE(s.info.error.empty()) << "step " << i << " failed: " << s.info.error;
      EXPECT_EQ(s.truncated, i == max_steps) << "step " << i << " of " << max_steps;
      EXPECT_FALSE(s.terminated);
    }
    EXPECT_THROW(env.step(policy(env, rng)), std::logic_error)
        << "stepping past the time limit must ask for reset()";
  }
}

void check_make_env(const std::string& id, ExperimentSpec spec, int max_steps, uint64_t seed,
                    const Policy& policy) {
  spec.steps_per_episode = max_steps;
  std::unique_ptr<Env> env = make_env(id, spec);
  EXPECT_EQ(env->spec().max_episode_steps, max_steps);
  std::mt19937_64 rng(seed);
  env->reset(seed);
  for (int i = 1; i <= max_steps; ++i) {
    StepResult s = env->step(policy(*env, rng));
    ASSERT_TRUE(s.info.error.empty()) << s.info.error;
    EXPECT_TRUE(std::isfinite(s.reward));
    if (spec.reward.normalize) {
      EXPECT_GT(s.reward, 0) << "normalised rewards are ratios";
    }
    EXPECT_EQ(s.truncated, i == max_steps);
  }
}

void check_env_conformance(const EnvMaker& make, const ExperimentSpec& spec,
                           const ConformanceOptions& o) {
  using ::testing::Test;
  {
    SCOPED_TRACE("spaces");
    std::unique_ptr<Env> env = make(spec);
    check_spaces(*env, o.seed, o.policy);
  }
  if (Test::HasFatalFailure()) return;
  {
    SCOPED_TRACE("seed determinism");
    check_seed_determinism(make, spec, o.seed, o.determinism_steps, o.policy);
  }
  {
    SCOPED_TRACE("random rollouts");
    std::unique_ptr<Env> env = make(spec);
    check_random_rollouts(*env, o.seed, o.rollout_episodes, o.rollout_steps, o.policy);
  }
  {
    SCOPED_TRACE("mask enforced");
    std::unique_ptr<Env> env = make(spec);
    check_mask_enforced(*env, o.seed, o.policy);
  }
  {
    SCOPED_TRACE("time limit and reset after the end");
    check_time_limit(make, spec, o.time_limit, o.seed, o.policy);
  }
  if (o.check_make_env) {
    SCOPED_TRACE("make_env stack");
    check_make_env(o.id, spec, o.time_limit, o.seed, o.policy);
  }
}

}  // namespace shardgym::envtest
