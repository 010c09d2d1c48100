#include "env/registry.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <system_error>
#include <type_traits>

#include "env/wrappers.h"

namespace shardgym {
namespace {

// Function-local static: filled by static registration objects in any order.
std::map<std::string, EnvType>& env_table() {
  static std::map<std::string, EnvType> table;
  return table;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? std::string("(none)") : out;
}

// Integral values as integers (1073741824, not 1.07374e+09); others as the stream prints them.
std::string number_text(double v) {
  if (std::abs(v) < 1e15 && v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

// Reads a field of a const spec through the builder's reference accessor; nothing is written.
template <typename T>
std::function<OptionValue(const ExperimentSpec&)> getter(std::function<T&(ExperimentSpec&)> field) {
  return [field](const ExperimentSpec& s) -> OptionValue {
    using V = std::conditional_t<std::is_same_v<T, int>, int64_t, T>;
    return V(field(const_cast<ExperimentSpec&>(s)));
  };
}

EnvOption make_option(std::string name, OptionType type, std::string key, std::string doc) {
  EnvOption o;
  o.name = std::move(name);
  o.type = type;
  o.config_key = std::move(key);
  o.doc = std::move(doc);
  return o;
}

}  // namespace

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::kBool:
      return "bool";
    case OptionType::kInt:
      return "int";
    case OptionType::kDouble:
      return "double";
    case OptionType::kString:
      return "string";
    case OptionType::kPath:
      return "path";
  }
  return "?";
}

std::string option_range_text(const EnvOption& o) {
  if (o.type != OptionType::kInt && o.type != OptionType::kDouble) return "";
  return "[" + number_text(o.min) + ", " + number_text(o.max) + "]";
}

std::string option_value_text(const OptionValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&value)) return number_text(*d);
  return "\"" + std::get<std::string>(value) + "\"";
}

EnvOptionError::EnvOptionError(std::string key, std::string reason)
    : std::invalid_argument(key + ": " + reason),
      key_(std::move(key)),
      reason_(std::move(reason)) {}

OptionValue EnvOption::default_value() const { return get(ExperimentSpec{}); }

OptionValue EnvOption::check(const OptionValue& value) const {
  auto wrong = [&]() -> EnvOptionError {
    return EnvOptionError(config_key, std::string("expected ") + option_type_name(type) + ", got " +
                                          option_value_text(value));
  };
  auto in_range = [&](double v) {
    if (!(v >= min && v <= max))  // also refuses NaN
      throw EnvOptionError(config_key, "must be between " + number_text(min) + " and " +
                                           number_text(max) + ", got " + number_text(v));
  };
  switch (type) {
    case OptionType::kBool:
      if (!std::holds_alternative<bool>(value)) throw wrong();
      return value;
    case OptionType::kInt: {
      if (!std::holds_alternative<int64_t>(value)) throw wrong();
      in_range(static_cast<double>(std::get<int64_t>(value)));
      return value;
    }
    case OptionType::kDouble: {
      double v = 0;
      if (const double* d = std::get_if<double>(&value))
        v = *d;
      else if (const int64_t* i = std::get_if<int64_t>(&value))
        v = static_cast<double>(*i);
      else
        throw wrong();
      in_range(v);
      return v;
    }
    case OptionType::kString:
    case OptionType::kPath:
      if (!std::holds_alternative<std::string>(value)) throw wrong();
      return value;
  }
  throw wrong();
}

EnvOption EnvOption::boolean(std::string name, std::string key, std::string doc,
                             std::function<bool&(ExperimentSpec&)> field) {
  EnvOption o = make_option(std::move(name), OptionType::kBool, std::move(key), std::move(doc));
  o.get = getter<bool>(field);
  o.set = [field](ExperimentSpec& s, const OptionValue& v) { field(s) = std::get<bool>(v); };
  return o;
}

namespace {

// A numeric option over [min, max]; V is how OptionValue holds the parsed value.
template <typename T, typename V>
EnvOption ranged(OptionType type, std::string name, std::string key, std::string doc,
                 std::function<T&(ExperimentSpec&)> field, double min, double max) {
  EnvOption o = make_option(std::move(name), type, std::move(key), std::move(doc));
  o.min = min;
  o.max = max;
  o.get = getter<T>(field);
  o.set = [field](ExperimentSpec& s, const OptionValue& v) {
    field(s) = static_cast<T>(std::get<V>(v));  // in [min, max]: an int option's fit an int
  };
  return o;
}

}  // namespace

EnvOption EnvOption::integer(std::string name, std::string key, std::string doc,
                             std::function<int&(ExperimentSpec&)> field, int min, int max) {
  return ranged<int, int64_t>(OptionType::kInt, std::move(name), std::move(key), std::move(doc),
                              std::move(field), min, max);
}

EnvOption EnvOption::real(std::string name, std::string key, std::string doc,
                          std::function<double&(ExperimentSpec&)> field, double min, double max) {
  return ranged<double, double>(OptionType::kDouble, std::move(name), std::move(key),
                                std::move(doc), std::move(field), min, max);
}

EnvOption EnvOption::text(std::string name, std::string key, std::string doc,
                          std::function<std::string&(ExperimentSpec&)> field) {
  EnvOption o = make_option(std::move(name), OptionType::kString, std::move(key), std::move(doc));
  o.get = getter<std::string>(field);
  o.set = [field](ExperimentSpec& s, const OptionValue& v) { field(s) = std::get<std::string>(v); };
  return o;
}

EnvOption EnvOption::path(std::string name, std::string key, std::string doc,
                          std::function<std::string&(ExperimentSpec&)> field) {
  EnvOption o = text(std::move(name), std::move(key), std::move(doc), std::move(field));
  o.type = OptionType::kPath;
  return o;
}

std::vector<std::pair<std::string, bool>> flag_list(const EnvFlags& f) {
  return {{"deterministic", f.deterministic},
          {"platform_dependent", f.platform_dependent},
          {"needs_libtorch", f.needs_libtorch},
          {"needs_trace", f.needs_trace},
          {"real_run", f.real_run}};
}

EnvRegistration::EnvRegistration(EnvType type) {
  if (type.id.empty() || !type.factory) {
    throw std::logic_error("REGISTER_SHARDGYM_ENV: empty id or null factory ('" + type.id + "')");
  }
  for (const EnvOption& o : type.options) {
    if (o.name.empty() || o.config_key.empty() || !o.get || !o.set)
      throw std::logic_error("REGISTER_SHARDGYM_ENV: " + type.id + ": option '" + o.name +
                             "' needs a name, a config key, get and set");
  }
  const std::string id = type.id;
  if (!env_table().emplace(id, std::move(type)).second) {
    throw std::logic_error("REGISTER_SHARDGYM_ENV: env id '" + id + "' registered twice");
  }
}

std::vector<std::string> registered_env_ids() {
  std::vector<std::string> ids;
  for (const auto& kv : env_table()) ids.push_back(kv.first);
  return ids;  // std::map keeps them sorted
}

bool env_registered(const std::string& id) { return env_table().count(id) > 0; }

const EnvType& env_type(const std::string& id) {
  const auto& table = env_table();
  auto it = table.find(id);
  if (it != table.end()) return it->second;
  throw std::invalid_argument("unknown env id '" + id +
                              "'; registered: " + joined(registered_env_ids()));
}

std::string env_description(const std::string& id) { return env_type(id).description; }

namespace {

// The task instance: which events a scenario with `draw:` entries draws (core/scenario_draw.h),
// as with_instance sets it (the config text stored in traces says so too).
EnvOption instance_option() {
  EnvOption o = make_option("instance", OptionType::kInt, "instance",
                            "task instance: the events a scenario's `draw:` entries draw "
                            "(a suite's test instances are 0-7, its training ones from 1000)");
  o.min = 0;
  o.max = 9007199254740992.0;  // 2^53: every integer below is exact in the double bounds
  o.get = [](const ExperimentSpec& s) -> OptionValue {
    return static_cast<int64_t>(s.scenario.instance);
  };
  o.set = [](ExperimentSpec& s, const OptionValue& v) {
    s = with_instance(std::move(s), static_cast<uint64_t>(std::get<int64_t>(v)));
  };
  return o;
}

}  // namespace

const std::vector<EnvOption>& common_env_options() {
  // Read by make_env (TimeLimit, NormalizeReward) and PartitionEnv::reset for every env.
  static const std::vector<EnvOption> options = {
      EnvOption::integer(
          "steps_per_episode", "steps_per_episode",
          "episode length in steps (TimeLimit truncates there)",
          [](ExperimentSpec& s) -> int& { return s.steps_per_episode; }, 1, 1 << 30),
      EnvOption::text("initial_plan", "initial_plan",
                      "plan in force at reset: \"megatron\", \"megatron-sp\" or a plan text",
                      [](ExperimentSpec& s) -> std::string& { return s.initial_plan; }),
      EnvOption::boolean("normalize_reward", "reward.normalize",
                         "reward as a ratio to the static Megatron-LM plan (1.0 = as good) "
                         "instead of raw",
                         [](ExperimentSpec& s) -> bool& { return s.reward.normalize; }),
      instance_option(),
  };
  return options;
}

std::vector<EnvOption> env_options(const std::string& id) {
  std::vector<EnvOption> all = common_env_options();
  const EnvType& type = env_type(id);
  all.insert(all.end(), type.options.begin(), type.options.end());
  return all;
}

std::vector<EnvOption> options_under(const std::string& config_prefix) {
  std::vector<EnvOption> out;
  for (const auto& kv : env_table()) {
    for (const EnvOption& o : kv.second.options) {
      if (o.config_key.rfind(config_prefix, 0) != 0) continue;
      bool seen = false;
      for (const EnvOption& p : out) seen = seen || p.config_key == o.config_key;
      if (!seen) out.push_back(o);
    }
  }
  return out;
}

void set_env_option(ExperimentSpec& spec, const std::string& name, const OptionValue& value) {
  const std::vector<EnvOption> options = env_options(spec.env_id);
  std::vector<std::string> names;
  for (const EnvOption& o : options) {
    if (o.name == name) return o.set(spec, o.check(value));
    names.push_back(o.name);
  }
  throw std::invalid_argument(spec.env_id + " has no option '" + name +
                              "'; allowed: " + joined(names));
}

void validate_env_spec(const ExperimentSpec& spec) {
  const EnvType& type = env_type(spec.env_id);
  for (const EnvOption& o : env_options(spec.env_id)) {
    const OptionValue v = o.check(o.get(spec));
    if (o.type != OptionType::kPath || std::get<std::string>(v).empty()) continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(std::get<std::string>(v), ec))
      throw EnvOptionError(o.config_key, "no file at '" + std::get<std::string>(v) + "'" +
                                             (ec ? " (" + ec.message() + ")" : std::string()));
  }
  if (type.validate) type.validate(spec);
}

std::unique_ptr<Env> make_bare_env(const std::string& id, const ExperimentSpec& spec) {
  std::unique_ptr<Env> env = env_type(id).factory(spec);
  if (!env) throw std::runtime_error("env factory for '" + id + "' returned null");
  return env;
}

Plan megatron_baseline(const Env& env, const ExperimentSpec& spec) {
  const int stages = std::max(1, env.spec().pipeline_stages);
  return resolve_baseline_plan("megatron", env.run(), stages,
                               std::max(stages, spec.catalog.max_pipeline_stages));
}

namespace {

// make_env's stack around a bare env.
std::unique_ptr<Env> standard_stack(std::unique_ptr<Env> env, const ExperimentSpec& spec) {
  if (spec.reward.normalize) {
    Plan baseline = megatron_baseline(*env, spec);
    env = std::make_unique<NormalizeReward>(std::move(env), spec.reward, std::move(baseline));
  }
  if (spec.steps_per_episode > 0) {
    env = std::make_unique<TimeLimit>(std::move(env), spec.steps_per_episode);
  }
  return env;
}

}  // namespace

std::unique_ptr<Env> make_env(const std::string& id, const ExperimentSpec& spec) {
  return standard_stack(make_bare_env(id, spec), spec);
}

EnvMaker make_sibling_envs(const std::string& id, const ExperimentSpec& spec) {
  const EnvType& type = env_type(id);
  if (!type.siblings) return [id, spec] { return make_env(id, spec); };
  EnvMaker bare = type.siblings(spec);
  return [id, spec, bare] {
    std::unique_ptr<Env> env = bare();
    if (!env) throw std::runtime_error("env siblings of '" + id + "' gave null");
    return standard_stack(std::move(env), spec);
  };
}

}  // namespace shardgym
