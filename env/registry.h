// Env registry by string id (OpenSpiel's REGISTER_SPIEL_GAME): a function-local static map
// filled by static registration objects. Registration units are OBJECT libraries linked
// into every executable through shardgym::builtins, so none is dropped by the linker.
//
//   REGISTER_SHARDGYM_ENV("shardgym/TPSim-v0", "simulated cluster ...", make_sim_env);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "env/env.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym {

// Builds the bare env (no wrappers) for an experiment.
using EnvFactory = std::function<std::unique_ptr<Env>(const ExperimentSpec&)>;

struct EnvRegistration {
  EnvRegistration(const std::string& id, const std::string& description, EnvFactory factory);
};

#define SHARDGYM_CONCAT_INNER(a, b) a##b
#define SHARDGYM_CONCAT(a, b) SHARDGYM_CONCAT_INNER(a, b)
#define REGISTER_SHARDGYM_ENV(id, description, factory) \
  static ::shardgym::EnvRegistration SHARDGYM_CONCAT(shardgym_env_reg_, __LINE__)( \
      id, description, factory)

std::vector<std::string> registered_env_ids();  // sorted
std::string env_description(const std::string& id);
bool env_registered(const std::string& id);
// Bare env; throws std::invalid_argument naming the known ids if `id` is unknown.
std::unique_ptr<Env> make_bare_env(const std::string& id, const ExperimentSpec& spec);
// The standard stack: TimeLimit(steps_per_episode) ∘ NormalizeReward(megatron) if
// spec.reward.normalize.
std::unique_ptr<Env> make_env(const std::string& id, const ExperimentSpec& spec);

}  // namespace shardgym
