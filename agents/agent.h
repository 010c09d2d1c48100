// Agent: anything that picks per-block strategies from observations (docs/design.md §1).
//
//   auto agent = make_agent("ppo(lr=3e-4)", env->spec(), seed);
//   Action a = agent->act(obs, env->action_mask(), info.plan_indices);
//   agent->observe({obs, a, r.reward, r.obs, r.terminated, r.truncated});
//   agent->update();   // learners learn here; others do nothing
//
// Contract (checked for every registered agent by the agent conformance suite): actions
// respect the mask; the same seed gives the same actions; save/load round-trips.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "env/env.h"
#include "env/registry.h"

namespace shardgym {

class VectorLearner;

struct Transition {
  Observation obs;
  Action action;
  double reward = 0;
  Observation next_obs;
  bool terminated = false;
  bool truncated = false;
  bool failed = false;  // the step failed (Info::error) or ran out of memory: reward is moot
};

class Agent {
 public:
  virtual ~Agent() = default;
  virtual std::string name() const = 0;
  // mask: flattened block-major, mask[b*K + k] (Env::action_mask()). plan: the plan in
  // force as catalog indices, one per block (Info::plan_indices of the reset or step that
  // gave `obs`; -1 where a block's strategy is not in the catalog): exact, where the
  // observation's first block feature is index / K as a float.
  virtual Action act(const Observation& obs, const std::vector<uint8_t>& mask,
                     const std::vector<int32_t>& plan) = 0;
  virtual void observe(const Transition& t) {}
  // Learn from what was observed; returns true when parameters changed.
  virtual bool update() { return false; }
  // Called at the start of each episode, before or after env.reset(): agents that read the
  // run (static plans, oracles) keep the env and do so at their first act() of the episode.
  virtual void begin_episode(Env& env) {}
  virtual bool learns() const { return false; }
  // Learners with a vectorised training loop of their own (PPO) return it (agents/learner.h;
  // the Trainer drives it); others nullptr, and callers drive act/observe/update on one env.
  virtual VectorLearner* vector_learner() { return nullptr; }
  // Training mode (default) explores; evaluation mode acts greedily where the agent can tell.
  virtual void set_training(bool training) {}
  // Full state to a file (params, optimizer, rng); load restores it exactly.
  // Checkpoints are untrusted (agents/checkpoint_file.h): load reads only a regular file of
  // at most max_checkpoint_bytes(), checks its CRC, and every value against the agent's
  // config before use; save writes a temporary file, fsyncs it and renames it over `path`.
  void save(const std::string& path) const;
  void load(const std::string& path);
  // What save writes, and load on bytes already read (`where` names them in errors): an agent
  // that holds another (agents/polished.h) nests its bytes. The default writes a header naming
  // the agent, then write_state() (load_text reads it and checks the name).
  virtual std::string save_bytes() const;
  virtual void load_bytes(const std::string& bytes, const std::string& where) {
    load_text(bytes, where);
  }
  void load_text(const std::string& bytes, const std::string& where);
  // The largest checkpoint this agent's config implies.
  virtual size_t max_checkpoint_bytes() const { return size_t{1} << 16; }

 protected:
  // Text state of the default save/load (e.g. the rng); stateless agents write nothing.
  virtual void write_state(std::ostream& out) const {}
  virtual void read_state(std::istream& in) {}
};

// "name(key=value,...)" → name + params (also used for scenario and strategy strings).
struct ParsedId {
  std::string name;
  std::map<std::string, std::string> params;
  static ParsedId parse(const std::string& text);  // throws std::invalid_argument
  double get(const std::string& key, double fallback) const;
  std::string get(const std::string& key, const std::string& fallback) const;
  // Throws std::invalid_argument naming the first key not in `allowed`.
  void check_keys(const std::vector<std::string>& allowed) const;
  std::string to_string() const;  // "name(k=v,...)", keys sorted
};

using AgentFactory =
    std::function<std::unique_ptr<Agent>(const ParsedId& id, const EnvSpec& spec, uint64_t seed)>;
// Checks an id's parameters without an env (keys, numbers, ranges), throwing
// std::invalid_argument exactly where the factory would: the config loader runs it, so a bad
// parameter is an error at load time, with file and line, not at the first episode.
using AgentParamsCheck = std::function<void(const ParsedId& id)>;

struct AgentRegistration {
  AgentRegistration(const std::string& name, const std::string& description, AgentFactory f,
                    AgentParamsCheck check);
};
#define REGISTER_SHARDGYM_AGENT(name, description, factory, check)                         \
  static ::shardgym::AgentRegistration SHARDGYM_CONCAT(shardgym_agent_reg_, __LINE__)(name, \
                                                                     description, factory, check)
// The check of agents without parameters.
void no_agent_params(const ParsedId& id);

std::vector<std::string> registered_agent_names();
std::string agent_description(const std::string& name);
// Parses `id` and runs its agent's parameter check; throws std::invalid_argument (unknown
// agent, bad syntax, bad parameter).
void check_agent_id(const std::string& id);
// Throws std::invalid_argument naming the known agents.
std::unique_ptr<Agent> make_agent(const std::string& id, const EnvSpec& spec, uint64_t seed);

}  // namespace shardgym
