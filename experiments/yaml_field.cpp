#include "experiments/yaml_field.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "experiments/config.h"

namespace shardgym {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

std::string format_number(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace

YamlField::YamlField(const YAML::Node& node, std::string file, std::string path, int fallback_line)
    : node_(node), file_(std::move(file)), path_(std::move(path)), fallback_line_(fallback_line) {}

int YamlField::line() const {
  if (node_.IsDefined()) {
    YAML::Mark mark = node_.Mark();
    if (!mark.is_null() && mark.line >= 0) return mark.line + 1;
  }
  return fallback_line_;
}

void YamlField::fail(const std::string& reason) const {
  throw ConfigError(file_, path_, line(), reason);
}

std::string YamlField::describe_found() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a mapping";
  if (node_.IsSequence()) return "a list";
  // A whole file that is one scalar is not echoed (`include: /etc/passwd` must not print the
  // file); other scalars are quoted only in part and on one line.
  if (path_.empty()) return "plain text of " + std::to_string(node_.Scalar().size()) + " characters";
  constexpr size_t kShown = 40;
  std::string v = node_.Scalar();
  const size_t nl = v.find_first_of("\r\n");
  const bool cut = v.size() > kShown || nl != std::string::npos;
  v = v.substr(0, std::min(kShown, nl));
  return "'" + v + (cut ? "...' (" + std::to_string(node_.Scalar().size()) + " characters)" : "'");
}

std::string YamlField::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void YamlField::expect_map() const {
  if (!node_.IsMap()) fail("expected a mapping (key: value lines), found " + describe_found());
}

void YamlField::expect_sequence() const {
  if (!node_.IsSequence()) fail("expected a list, found " + describe_found());
}

void YamlField::check_keys(const std::vector<std::string>& known) const {
  expect_map();
  std::set<std::string> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const YAML::Node key_node = it->first;  // a copy: `it->` yields a temporary proxy
    YamlField key_field(key_node, file_, path_, line());
    if (!key_node.IsScalar())
      key_field.fail("a key must be a plain name, found " + key_field.describe_found());
    const std::string key = key_node.Scalar();
    YamlField at_key(key_node, file_, key_path(key), line());
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string hint = closest_name(key, known);
      at_key.fail("unknown key" +
                  (hint.empty() ? std::string() : "; did you mean '" + hint + "'?") +
                  " (known keys: " + join(known) + ")");
    }
    if (!seen.insert(key).second) at_key.fail("key appears twice");
  }
}

bool YamlField::has(const std::string& key) const {
  if (!node_.IsMap()) return false;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return true;
  }
  return false;
}

std::optional<YamlField> YamlField::optional(const std::string& key) const {
  expect_map();
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
    // The value's own mark, or the key's line when the value is empty (`key:`).
    int key_line = it->first.Mark().is_null() ? line() : it->first.Mark().line + 1;
    return YamlField(it->second, file_, key_path(key), key_line);
  }
  return std::nullopt;
}

YamlField YamlField::child(const std::string& key) const {
  auto field = optional(key);
  if (!field) throw ConfigError(file_, key_path(key), line(), "missing required key");
  return *field;
}

std::vector<std::string> YamlField::keys() const {
  expect_map();
  std::vector<std::string> out;
  for (auto it = node_.begin(); it != node_.end(); ++it) out.push_back(it->first.Scalar());
  return out;
}

size_t YamlField::size() const {
  expect_sequence();
  return node_.size();
}

YamlField YamlField::at(size_t index) const {
  expect_sequence();
  return YamlField(node_[index], file_, path_ + "[" + std::to_string(index) + "]", line());
}

std::string YamlField::as_string() const {
  if (!node_.IsDefined() || node_.IsNull()) fail("expected a string, found nothing");
  if (!node_.IsScalar()) fail("expected a string, found " + describe_found());
  return node_.Scalar();
}

int YamlField::as_int(int min, int max) const {
  if (!node_.IsScalar()) fail("expected an integer, found " + describe_found());
  const std::string& s = node_.Scalar();
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE) fail("expected an integer, found '" + s + "'");
  if (v < min || v > max) {
    std::string range = max == INT_MAX
                            ? "at least " + std::to_string(min)
                            : "between " + std::to_string(min) + " and " + std::to_string(max);
    fail("must be " + range + ", found " + s);
  }
  return static_cast<int>(v);
}

double YamlField::as_double(double min, double max) const {
  if (!node_.IsScalar()) fail("expected a number, found " + describe_found());
  const std::string& s = node_.Scalar();
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    fail("expected a number, found '" + s + "'");
  }
  if (v < min || v > max) {
    std::string range = max >= 1e308
                            ? "at least " + format_number(min)
                            : "between " + format_number(min) + " and " + format_number(max);
    fail("must be " + range + ", found " + s);
  }
  return v;
}

double YamlField::as_positive_double() const {
  double v = as_double();
  if (!(v > 0)) fail("must be greater than 0, found " + node_.Scalar());
  return v;
}

bool YamlField::as_bool() const {
  if (!node_.IsScalar()) fail("expected true or false, found " + describe_found());
  std::string s = lower(node_.Scalar());
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail("expected true or false, found '" + node_.Scalar() + "'");
}

std::string YamlField::as_choice(const std::vector<std::string>& choices) const {
  std::string s = as_string();
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  std::string hint = closest_name(s, choices);
  fail("'" + s + "' is not one of " + join(choices) +
       (hint.empty() ? std::string() : "; did you mean '" + hint + "'?"));
}

}  // namespace shardgym
