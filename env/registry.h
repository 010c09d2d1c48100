// Env registry by string id, where a registration carries data (OpenSpiel's GameType with its
// parameter_specification and provides_* flags): what the env is, which typed options it reads
// from the experiment config (name, type, default, meaning, config key), its flags and a check
// of a whole spec. The config loader, the conformance suite, the Python binding and
// `shardgym envs` read this data instead of matching id strings, so a new env is one
// registration and nothing else learns its name.
//
// A function-local static map filled by static registration objects; registration units are
// OBJECT libraries linked into every executable through shardgym::builtins, so none is dropped.
//
//   EnvType replay_type() {
//     EnvType t{"shardgym/TPReplay-v0", "recorded trace played back", make_replay_env};
//     t.flags.needs_trace = true;
//     t.options.push_back(EnvOption::path("trace", "replay_trace", "trace to play back",
//         [](ExperimentSpec& s) -> std::string& { return s.replay_trace; }));
//     t.validate = [](const ExperimentSpec& s) { if (s.replay_trace.empty()) throw ...; };
//     return t;
//   }
//   REGISTER_SHARDGYM_ENV(replay_type());
//
// Length: the registration's data types (options, flags, type) and the registry's calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "env/env.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym {

// Builds the bare env (no wrappers) for an experiment.
using EnvFactory = std::function<std::unique_ptr<Env>(const ExperimentSpec&)>;
// Builds one env of a family: envs of one spec made to run side by side (a vector env's).
using EnvMaker = std::function<std::unique_ptr<Env>()>;

enum class OptionType { kBool, kInt, kDouble, kString, kPath };
const char* option_type_name(OptionType type);  // "bool", "int", "double", "string", "path"

using OptionValue = std::variant<bool, int64_t, double, std::string>;
std::string option_value_text(const OptionValue& value);  // true, 3, 0.001, "text"

// A bad option or spec found by a registration: the config key it is about
// ("live.extra.lr", "replay_trace") and why. The loader adds file and line.
class EnvOptionError : public std::invalid_argument {
 public:
  EnvOptionError(std::string key, std::string reason);
  const std::string& key() const { return key_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string key_, reason_;
};

// One typed option: read and written through the typed field of ExperimentSpec that holds it,
// so the default is that field's initializer (one place) and the runtime reads typed values.
struct EnvOption {
  std::string name;  // keyword in Python (gymnasium.make(id, lr=3e-3))
  OptionType type = OptionType::kString;
  std::string config_key;  // where it lives in the YAML: "live.extra.lr", "reward.normalize"
  std::string doc;
  double min = -1e308, max = 1e308;  // numbers: the inclusive range
  std::function<OptionValue(const ExperimentSpec&)> get;
  std::function<void(ExperimentSpec&, const OptionValue&)> set;  // value already checked

  OptionValue default_value() const;  // get(ExperimentSpec{})
  // The value converted to this option's type (an int for a double is widened), range
  // checked; EnvOptionError naming config_key otherwise. A path's existence is validate's.
  OptionValue check(const OptionValue& value) const;

  // Builders for an option held in a field of the spec (`field` returns a reference to it).
  static EnvOption boolean(std::string name, std::string key, std::string doc,
                           std::function<bool&(ExperimentSpec&)> field);
  static EnvOption integer(std::string name, std::string key, std::string doc,
                           std::function<int&(ExperimentSpec&)> field, int min, int max);
  static EnvOption real(std::string name, std::string key, std::string doc,
                        std::function<double&(ExperimentSpec&)> field, double min, double max);
  static EnvOption text(std::string name, std::string key, std::string doc,
                        std::function<std::string&(ExperimentSpec&)> field);
  // A file path ("" = not set); a config's relative path is taken from the config's folder.
  static EnvOption path(std::string name, std::string key, std::string doc,
                        std::function<std::string&(ExperimentSpec&)> field);
};
std::string option_range_text(const EnvOption& option);  // "[0, 1000000]"; "" if not a number

// What a user and a test may rely on (EnvPool's / CompilerGym's spec flags). The conformance
// suite checks deterministic and platform_dependent against the env's own EnvSpec.
struct EnvFlags {
  bool deterministic = true;        // same spec, seed and actions: bit-identical episodes
  bool platform_dependent = false;  // measurements depend on the machine that runs it
  bool needs_libtorch = false;      // registered only in LibTorch builds
  bool needs_trace = false;         // plays back a recorded trace (its `trace` option)
  bool real_run = false;  // steps train for real: seconds each, may be unable to start here
};
std::vector<std::pair<std::string, bool>> flag_list(const EnvFlags& flags);  // name, value

struct EnvType {
  EnvType() = default;
  EnvType(std::string id_, std::string description_, EnvFactory factory_)
      : id(std::move(id_)), description(std::move(description_)), factory(std::move(factory_)) {}

  std::string id;           // "shardgym/TPSim-v0"
  std::string description;  // one line
  EnvFactory factory;
  // Optional: a maker of bare envs of `spec` that share what the backend can share between
  // them (the simulator: its costs, runtime/sim/plan_pricer.h SimOptions::costs). Each
  // call of the returned maker gives one env, as factory(spec) would. Empty: envs are built
  // alone by factory.
  std::function<EnvMaker(const ExperimentSpec&)> siblings;
  std::vector<EnvOption> options;  // the env's own; env_options() adds the common ones
  EnvFlags flags;
  // Checks a whole spec for this env beyond each option's type and range (keys that must
  // agree, required options); throws EnvOptionError naming the key. May be empty.
  std::function<void(const ExperimentSpec&)> validate;
};

struct EnvRegistration {
  explicit EnvRegistration(EnvType type);  // logic_error: empty id, no factory, twice
};

#define SHARDGYM_CONCAT_INNER(a, b) a##b
#define SHARDGYM_CONCAT(a, b) SHARDGYM_CONCAT_INNER(a, b)
#define REGISTER_SHARDGYM_ENV(type) \
  static ::shardgym::EnvRegistration SHARDGYM_CONCAT(shardgym_env_reg_, __LINE__)(type)

std::vector<std::string> registered_env_ids();  // sorted
bool env_registered(const std::string& id);
// The registration; throws std::invalid_argument naming the known ids if `id` is unknown.
const EnvType& env_type(const std::string& id);
std::string env_description(const std::string& id);
// Options make_env reads for every env (steps_per_episode, initial_plan, normalize_reward).
const std::vector<EnvOption>& common_env_options();
// common_env_options() followed by the env's own.
std::vector<EnvOption> env_options(const std::string& id);
// The options any registered env declares under a config section ("live.extra."), so the
// loader can type a section before it knows which env will run it.
std::vector<EnvOption> options_under(const std::string& config_prefix);

// Sets option `name` of env `spec.env_id` (invalid_argument naming the allowed ones if the
// env has no such option; EnvOptionError if the value has the wrong type or range).
void set_env_option(ExperimentSpec& spec, const std::string& name, const OptionValue& value);
// Every option of spec.env_id in range, paths that exist, then the env's validate.
void validate_env_spec(const ExperimentSpec& spec);

// Megatron-LM's plan for `env`'s run at the env's stage count (the actions cannot change it;
// an initial plan that is Megatron-LM's own resolves to the same p), as `eval` pairs it: the
// baseline of reward normalisation and of `train`'s Megatron column.
Plan megatron_baseline(const Env& env, const ExperimentSpec& spec);

// Bare env; throws std::invalid_argument naming the known ids if `id` is unknown.
std::unique_ptr<Env> make_bare_env(const std::string& id, const ExperimentSpec& spec);
// The standard stack: TimeLimit(steps_per_episode) ∘ NormalizeReward(megatron) if
// spec.reward.normalize.
std::unique_ptr<Env> make_env(const std::string& id, const ExperimentSpec& spec);
// A maker of make_env's envs for envs of one spec that run side by side (a vector env's, in
// C++ and Python): the backend's siblings where it registered them, so that the envs share
// what they can (each env's figures are those of an env built alone), else make_env.
EnvMaker make_sibling_envs(const std::string& id, const ExperimentSpec& spec);

}  // namespace shardgym
