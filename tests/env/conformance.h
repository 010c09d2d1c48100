// Env conformance suite (OpenSpiel's basic_tests.h): the same checks for every env, so an
// env registered later is checked without writing new tests.
//
//   TEST(MyEnv, Conforms) {
//     ExperimentSpec spec = test_specs::tiny();
//     envtest::check_env_conformance(envtest::registry_maker("shardgym/MyEnv-v0"), spec);
//   }
//
// Checks (GoogleTest assertions; each usable alone):
//   spaces       EnvSpec agrees with the data: obs size and membership, MultiDiscrete(B×K)
//                action space, mask size, determinism / platform flags, reset info
//   determinism  (deterministic envs) same seed ⇒ bit-identical obs and rewards over random
//                masked steps, both for a fresh instance and for a second reset
//   rollouts     policy actions (random masked by default) never throw; obs stay in space,
//                rewards finite, a failed step is truncated with info.error set
//   mask         a masked, out-of-range or wrongly sized action throws std::invalid_argument
//                naming the block, and leaves the env usable
//   time limit   TimeLimit(n) truncates exactly at step n; stepping on throws; reset works
//   make_env     (registered ids) the standard stack truncates at steps_per_episode with
//                finite rewards
//   flags        (registered ids) the registration's deterministic / platform_dependent
//                flags are the env's own EnvSpec flags
// Link shardgym::env_conformance to use it from another test folder.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "env/env.h"
#include "env/registry.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym::envtest {

// Builds a fresh bare env (no wrappers) for a spec.
using EnvMaker = std::function<std::unique_ptr<Env>(const ExperimentSpec&)>;
// Picks the next action; the default draws uniformly from the action mask. An env that only
// accepts some plans (a replay follows its recording) passes its own.
using Policy = std::function<Action(Env&, std::mt19937_64&)>;

Action random_masked_action(Env& env, std::mt19937_64& rng);

struct ConformanceOptions {
  uint64_t seed = 7;
  int determinism_steps = 20;
  int rollout_episodes = 2;
  int rollout_steps = 25;
  int time_limit = 5;
  bool check_make_env = false;  // also build the standard stack with make_env(id, ...)
  std::string id;               // registry id, for check_make_env
  Policy policy = random_masked_action;
};

EnvMaker registry_maker(const std::string& id);
// The small spec the suite uses for a registered id: a tiny GPT on 4 test GPUs (ids with
// flag real_run: hidden 32, seq 16 on 2 ranks as threads).
ExperimentSpec conformance_spec(const std::string& id);

void check_spaces(Env& env, uint64_t seed, const Policy& policy = random_masked_action);
void check_seed_determinism(const EnvMaker& make, const ExperimentSpec& spec, uint64_t seed,
                            int steps, const Policy& policy = random_masked_action);
void check_random_rollouts(Env& env, uint64_t seed, int episodes, int steps,
                           const Policy& policy = random_masked_action);
void check_mask_enforced(Env& env, uint64_t seed, const Policy& policy = random_masked_action);
void check_time_limit(const EnvMaker& make, const ExperimentSpec& spec, int max_steps,
                      uint64_t seed, const Policy& policy = random_masked_action);
void check_registration_flags(const EnvFlags& flags, Env& env);
void check_make_env(const std::string& id, ExperimentSpec spec, int max_steps, uint64_t seed,
                    const Policy& policy = random_masked_action);

// All of the above.
void check_env_conformance(const EnvMaker& make, const ExperimentSpec& spec,
                           const ConformanceOptions& options = {});

}  // namespace shardgym::envtest
