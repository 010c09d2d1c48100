// YamlField: a YAML node together with where it is (file, key path, line), so that every
// typed read can fail with a ConfigError that points at the offending key. Used by the
// config loader only; it keeps yaml-cpp out of every other header.
//
//   YamlField root(doc, "quickstart.yaml", "");
//   root.check_keys({"model", "cluster"});
//   int layers = root.child("model").child("layers").as_int(1);
#pragma once

#include <climits>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace shardgym {

class YamlField {
 public:
  YamlField(const YAML::Node& node, std::string file, std::string path, int fallback_line = 0);

  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  int line() const;  // 1-based
  const YAML::Node& node() const { return node_; }

  [[noreturn]] void fail(const std::string& reason) const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  void expect_map() const;
  void expect_sequence() const;

  // Map checks: every key is in `known` (else "unknown key ..., did you mean ...") and no key
  // appears twice.
  void check_keys(const std::vector<std::string>& known) const;
  bool has(const std::string& key) const;
  // Required child: fails with "missing required key" at this map's line.
  YamlField child(const std::string& key) const;
  std::optional<YamlField> optional(const std::string& key) const;
  // Map keys in file order.
  std::vector<std::string> keys() const;

  // Sequence access: path "x[i]".
  size_t size() const;
  YamlField at(size_t index) const;

  // Scalars. Ranges are inclusive; failures say what was expected and what was found.
  std::string as_string() const;
  int as_int(int min = INT_MIN, int max = INT_MAX) const;
  double as_double(double min = -1e308, double max = 1e308) const;
  double as_positive_double() const;  // > 0
  bool as_bool() const;
  std::string as_choice(const std::vector<std::string>& choices) const;

 private:
  std::string describe_found() const;
  std::string key_path(const std::string& key) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
  int fallback_line_;
};

}  // namespace shardgym
