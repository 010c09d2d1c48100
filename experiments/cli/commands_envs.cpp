// `shardgym envs`: every registered env with its description, flags and options (name, type,
// default, config key, meaning), read from the registrations (env/registry.h).
#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

#include "datasets/trace_summary.h"
#include "env/registry.h"
#include "experiments/cli/commands.h"

namespace shardgym::cli {
namespace {

std::string json_number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string json_value(const OptionValue& v) {
  if (const double* d = std::get_if<double>(&v)) return json_number(*d);
  if (const std::string* s = std::get_if<std::string>(&v)) return json_string(*s);
  return option_value_text(v);  // true / false / an integer
}

// One line per option: name, type, default, range and config key in aligned columns, then
// the meaning (the longest column, so it comes last and is not padded).
void print_options(const std::vector<EnvOption>& options, std::ostream& out) {
  std::vector<std::array<std::string, 6>> rows = {
      {"option", "type", "default", "range", "config key", "meaning"}};
  for (const EnvOption& o : options) {
    rows.push_back({o.name, option_type_name(o.type), option_value_text(o.default_value()),
                    option_range_text(o), o.config_key, o.doc});
  }
  std::array<size_t, 5> width{};
  for (const auto& row : rows)
    for (size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    out << "    ";
    for (size_t c = 0; c < width.size(); ++c)
      out << row[c] << std::string(width[c] - row[c].size() + 2, ' ');
    out << row[5] << "\n";
  }
}

void print_text(std::ostream& out) {
  out << "Options are set in the experiment YAML at their config key, or as keyword options of\n"
         "gymnasium.make(id, config=..., name=value) in Python. The first three apply to every "
         "env.\n";
  for (const std::string& id : registered_env_ids()) {
    const EnvType& t = env_type(id);
    out << "\n" << id << "\n  " << t.description << "\n  flags:";
    for (const auto& [name, value] : flag_list(t.flags))
      out << " " << name << "=" << (value ? "yes" : "no");
    out << "\n  options:\n";
    print_options(env_options(id), out);
  }
}

void print_json(std::ostream& out) {
  out << "{\"envs\": [";
  bool first_env = true;
  for (const std::string& id : registered_env_ids()) {
    const EnvType& t = env_type(id);
    out << (first_env ? "" : ",") << "\n  {\"id\": " << json_string(id)
        << ", \"description\": " << json_string(t.description) << ",\n   \"flags\": {";
    bool first = true;
    for (const auto& [name, value] : flag_list(t.flags)) {
      out << (first ? "" : ", ") << json_string(name) << ": " << (value ? "true" : "false");
      first = false;
    }
    out << "},\n   \"options\": [";
    first = true;
    for (const EnvOption& o : env_options(id)) {
      out << (first ? "" : ",") << "\n    {\"name\": " << json_string(o.name)
          << ", \"type\": " << json_string(option_type_name(o.type))
          << ", \"default\": " << json_value(o.default_value())
          << ", \"config_key\": " << json_string(o.config_key);
      if (o.type == OptionType::kInt || o.type == OptionType::kDouble)
        out << ", \"min\": " << json_number(o.min) << ", \"max\": " << json_number(o.max);
      out << ", \"doc\": " << json_string(o.doc) << "}";
      first = false;
    }
    out << "]}";
    first_env = false;
  }
  out << "\n]}\n";
}

}  // namespace

int run_envs(bool json, std::ostream& out) {
  if (json) {
    print_json(out);
  } else {
    print_text(out);
  }
  return 0;
}

}  // namespace shardgym::cli
