#include "env/registry.h"

#include <map>
#include <stdexcept>

#include "env/wrappers.h"

namespace shardgym {
namespace {

struct Entry {
  std::string description;
  EnvFactory factory;
};

// Function-local static: filled by static registration objects in any order.
std::map<std::string, Entry>& env_table() {
  static std::map<std::string, Entry> table;
  return table;
}

const Entry& lookup(const std::string& id) {
  const auto& table = env_table();
  auto it = table.find(id);
  if (it != table.end()) return it->second;
  std::string known;
  for (const auto& kv : table) known += (known.empty() ? "" : ", ") + kv.first;
  throw std::invalid_argument("unknown env id '" + id + "'; registered: " +
                              (known.empty() ? std::string("(none)") : known));
}

}  // namespace

EnvRegistration::EnvRegistration(const std::string& id, const std::string& description,
                                 EnvFactory factory) {
  if (id.empty() || !factory) {
    throw std::logic_error("REGISTER_SHARDGYM_ENV: empty id or null factory ('" + id + "')");
  }
  auto inserted = env_table().emplace(id, Entry{description, std::move(factory)});
  if (!inserted.second) {
    throw std::logic_error("REGISTER_SHARDGYM_ENV: env id '" + id + "' registered twice");
  }
}

std::vector<std::string> registered_env_ids() {
  std::vector<std::string> ids;
  for (const auto& kv : env_table()) ids.push_back(kv.first);
  return ids;  // std::map keeps them sorted
}

std::string env_description(const std::string& id) { return lookup(id).description; }

bool env_registered(const std::string& id) { return env_table().count(id) > 0; }

std::unique_ptr<Env> make_bare_env(const std::string& id, const ExperimentSpec& spec) {
  std::unique_ptr<Env> env = lookup(id).factory(spec);
  if (!env) throw std::runtime_error("env factory for '" + id + "' returned null");
  return env;
}

std::unique_ptr<Env> make_env(const std::string& id, const ExperimentSpec& spec) {
  std::unique_ptr<Env> env = make_bare_env(id, spec);
  if (spec.reward.normalize) {
    Plan baseline =
        resolve_baseline_plan("megatron", env->run(), 1, spec.catalog.max_pipeline_stages);
    env = std::make_unique<NormalizeReward>(std::move(env), spec.reward, std::move(baseline));
  }
  if (spec.steps_per_episode > 0) {
    env = std::make_unique<TimeLimit>(std::move(env), spec.steps_per_episode);
  }
  return env;
}

}  // namespace shardgym
