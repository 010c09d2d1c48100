#include "agents/agent.h"

#include "agents/checkpoint_file.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "runtime/core/text.h"

namespace shardgym {
namespace {

struct Entry {
  std::string description;
  AgentFactory factory;
  AgentParamsCheck check;
};

std::map<std::string, Entry>& agent_registry() {
  static std::map<std::string, Entry> registry;
  return registry;
}

std::string known_agents() {
  std::string out;
  for (const auto& [name, entry] : agent_registry()) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none registered" : out;
}

constexpr const char* kSaveMagic = "shardgym-agent";
constexpr int kSaveVersion = 2;  // 2: a CRC line at the end

}  // namespace

ParsedId ParsedId::parse(const std::string& raw) {
  const std::string text = trim(raw);
  ParsedId id;
  const size_t open = text.find('(');
  id.name = trim(text.substr(0, open));
  if (id.name.empty()) throw std::invalid_argument("id '" + raw + "': empty name");
  if (id.name.find_first_of("),=") != std::string::npos)
    throw std::invalid_argument("id '" + raw + "': name '" + id.name + "' has ')', ',' or '='");
  if (open == std::string::npos) return id;
  if (text.back() != ')') throw std::invalid_argument("id '" + raw + "': expected ')' at the end");
  const std::string body = text.substr(open + 1, text.size() - open - 2);
  // Split on commas at nesting depth 0, so values may hold "tp2d(d1=2,d2=4,first=row)".
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0)
      throw std::invalid_argument("id '" + raw + "': unbalanced ')' at position " +
                                  std::to_string(open + 1 + i));
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw std::invalid_argument("id '" + raw + "': unbalanced '('");
  if (!trim(cur).empty() || !items.empty()) items.push_back(cur);
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("id '" + raw + "': parameter '" + trim(item) +
                                  "' is not key=value");
    std::string key = trim(item.substr(0, eq));
    std::string value = trim(item.substr(eq + 1));
    if (key.empty()) throw std::invalid_argument("id '" + raw + "': empty parameter name");
    if (key.find_first_of("()") != std::string::npos)
      throw std::invalid_argument("id '" + raw + "': bad parameter name '" + key + "'");
    if (!id.params.emplace(key, value).second)
      throw std::invalid_argument("id '" + raw + "': parameter '" + key + "' given twice");
  }
  return id;
}

double ParsedId::get(const std::string& key, double fallback) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  try {
    size_t used = 0;
    double v = std::stod(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing characters");
    return v;
  } catch (const std::exception&) {
    throw std::invalid_argument(name + ": parameter " + key + "='" + it->second +
                                "' is not a number");
  }
}

std::string ParsedId::get(const std::string& key, const std::string& fallback) const {
  auto it = params.find(key);
  return it == params.end() ? fallback : it->second;
}

void ParsedId::check_keys(const std::vector<std::string>& allowed) const {
  for (const auto& [key, value] : params) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw std::invalid_argument(name + ": unknown parameter '" + key +
                                "' (accepted: " + (list.empty() ? "none" : list) + ")");
  }
}

std::string ParsedId::to_string() const {
  if (params.empty()) return name;
  std::string out = name + "(";
  bool first = true;
  for (const auto& [key, value] : params) {
    out += (first ? "" : ",") + key + "=" + value;
    first = false;
  }
  return out + ")";
}

AgentRegistration::AgentRegistration(const std::string& name, const std::string& description,
                                     AgentFactory f, AgentParamsCheck check) {
  if (!agent_registry().emplace(name, Entry{description, std::move(f), std::move(check)}).second)
    throw std::logic_error("agent '" + name + "' registered twice");
}

std::vector<std::string> registered_agent_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : agent_registry()) names.push_back(name);
  return names;
}

std::string agent_description(const std::string& name) {
  auto it = agent_registry().find(name);
  if (it == agent_registry().end())
    throw std::invalid_argument("unknown agent '" + name + "' (known: " + known_agents() + ")");
  return it->second.description;
}

void no_agent_params(const ParsedId& id) { id.check_keys({}); }

void check_agent_id(const std::string& id) {
  ParsedId parsed = ParsedId::parse(id);
  auto it = agent_registry().find(parsed.name);
  if (it == agent_registry().end())
    throw std::invalid_argument("unknown agent '" + parsed.name + "' in '" + id +
                                "' (known: " + known_agents() + ")");
  it->second.check(parsed);
}

std::unique_ptr<Agent> make_agent(const std::string& id, const EnvSpec& spec, uint64_t seed) {
  ParsedId parsed = ParsedId::parse(id);
  auto it = agent_registry().find(parsed.name);
  if (it == agent_registry().end())
    throw std::invalid_argument("unknown agent '" + parsed.name + "' in '" + id +
                                "' (known: " + known_agents() + ")");
  return it->second.factory(parsed, spec, seed);
}

std::string Agent::save_bytes() const {
  std::ostringstream out;
  out << kSaveMagic << ' ' << kSaveVersion << '\n' << name() << '\n';
  write_state(out);
  if (!out) throw std::runtime_error("agent save: cannot encode the state of '" + name() + "'");
  return checkpoint::seal_text(out.str());
}

void Agent::save(const std::string& path) const {
  checkpoint::write_file_atomic(path, save_bytes(), name() + " save");
}

void Agent::load(const std::string& path) {
  load_bytes(checkpoint::read_regular_file(path, max_checkpoint_bytes(), name() + " load"),
             name() + " load: '" + path + "'");
}

void Agent::load_text(const std::string& bytes, const std::string& where) {
  // Version 1 (no CRC line) is still read: it is text, and every value is checked as below.
  const bool v1 = bytes.rfind(std::string(kSaveMagic) + " 1\n", 0) == 0;
  std::istringstream in(v1 ? bytes : checkpoint::unseal_text(bytes, where));
  std::string magic, saved_name;
  int version = 0;
  in >> magic >> version;
  in.ignore(1);
  std::getline(in, saved_name);
  if (magic != kSaveMagic || (version != kSaveVersion && version != 1))
    throw std::runtime_error(where + " is not a " + kSaveMagic + " v1 or v" +
                             std::to_string(kSaveVersion) + " file");
  if (saved_name != name())
    throw std::runtime_error(where + " holds agent '" + saved_name + "', not '" + name() + "'");
  try {
    read_state(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(where + ": " + e.what());
  }
  if (in.bad()) throw std::runtime_error(where + ": read failed");
  std::string rest;
  if (in >> rest) throw std::runtime_error(where + ": unexpected data after the state");
}

}  // namespace shardgym
