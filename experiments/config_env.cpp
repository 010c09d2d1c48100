// The loader's side of the env registrations (env/registry.h): sections whose keys are
// options an env declares (`live.extra`), and the env's own check of the whole spec, both
// turned into ConfigErrors with file, line and key. No env id is named here.
#include <algorithm>
#include <climits>
#include <filesystem>

#include "env/registry.h"
#include "experiments/config_parts.h"

namespace shardgym {
namespace config_detail {
namespace {

int int_bound(double v) {
  return static_cast<int>(
      std::clamp(v, static_cast<double>(INT_MIN), static_cast<double>(INT_MAX)));
}

OptionValue read_value(const YamlField& f, const EnvOption& o, const std::string& base_dir) {
  switch (o.type) {
    case OptionType::kBool:
      return f.as_bool();
    case OptionType::kInt:
      return static_cast<int64_t>(f.as_int(int_bound(o.min), int_bound(o.max)));
    case OptionType::kDouble:
      return f.as_double(o.min, o.max);
    case OptionType::kString:
      return f.as_string();
    case OptionType::kPath: {
      // Relative to the config file, like `include:` and `replay_trace:`.
      const std::string text = f.as_string();
      if (text.empty()) return text;
      return (std::filesystem::path(base_dir) / text).lexically_normal().string();
    }
  }
  f.fail("option of an unknown type");
}

}  // namespace

void parse_env_options(const YamlField& section, const std::string& prefix,
                       const std::string& base_dir, ExperimentSpec& spec) {
  const std::vector<EnvOption> options = options_under(prefix + ".");
  std::vector<std::string> names;
  for (const EnvOption& o : options) names.push_back(o.config_key.substr(prefix.size() + 1));
  if (names.empty()) {
    section.expect_map();
    if (section.keys().empty()) return;
    section.fail("no env registered in this build reads options here (registered: " + [] {
      std::string ids;
      for (const std::string& id : registered_env_ids()) ids += (ids.empty() ? "" : ", ") + id;
      return ids;
    }() + ")");
  }
  section.check_keys(names);  // unknown keys: "unknown key ... (known keys: ...)" at their line
  for (size_t i = 0; i < options.size(); ++i) {
    const auto field = section.optional(names[i]);
    if (!field) continue;
    const OptionValue value = read_value(*field, options[i], base_dir);
    try {
      options[i].set(spec, options[i].check(value));
    } catch (const EnvOptionError& e) {
      field->fail(e.reason());
    }
  }
}

int line_of_key(const YamlField& root, const std::string& key) {
  // Recursion, not a loop over one YamlField: assigning a YAML::Node writes through it.
  if (!root.is_map()) return root.line();
  const size_t dot = key.find('.');
  const auto child = root.optional(key.substr(0, dot));
  if (!child) return root.line();
  return dot == std::string::npos ? child->line() : line_of_key(*child, key.substr(dot + 1));
}

void validate_env(const YamlField& root, const ExperimentSpec& spec) {
  try {
    validate_env_spec(spec);
  } catch (const EnvOptionError& e) {
    throw ConfigError(root.file(), e.key(), line_of_key(root, e.key()), e.reason());
  }
}

}  // namespace config_detail
}  // namespace shardgym
