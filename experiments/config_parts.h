// Internal pieces of the config loader (experiments/config.cpp): one parse function per
// section of the schema, each reading a YamlField and failing with a ConfigError that
// points at the key. Not part of the public interface; include experiments/config.h.
#pragma once

#include <string>
#include <vector>

#include "experiments/config.h"
#include "experiments/yaml_field.h"
#include "runtime/core/catalog.h"
#include "runtime/core/cluster_spec.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/scenario.h"

namespace shardgym {
namespace config_detail {

// A hardware catalog plus where each entry was defined ("file:line"), for duplicate errors.
struct CatalogSource {
  HardwareCatalog catalog;
  std::vector<std::string> device_at, link_at;
  // Per device: "" or why it cannot run the model (no peak for its dtype), reported only
  // when a cluster uses it.
  std::vector<std::string> device_unusable;
};

// Reads the `devices:` and `links:` lists of a map (a catalog file or the cluster section)
// and appends them to `into`; a name defined twice is an error naming both places.
void parse_hardware(const YamlField& map, DType dtype, CatalogSource& into);

// `cluster:`; `included` holds the catalogs pulled in with `include:`. Keeps only the
// devices and links the nodes use.
ClusterSpec parse_cluster(const YamlField& field, DType dtype, CatalogSource included);

ModelSpec parse_model(const YamlField& field);
// `training:` (how the job runs: distributed optimizer, overlaps) into the model spec.
void parse_training(const YamlField& field, ModelSpec& model);
// `published:` (a measured run the simulator is validated against).
PublishedRun parse_published(const YamlField& field);
// `scenario:` (config_scenario.cpp): scripted events and the draws of an instance's events.
Scenario parse_scenario(const YamlField& field, const ClusterSpec& cluster);
// "'x' is not a known <what> (known: a, b); did you mean 'a'?"
std::string unknown_name(const std::string& what, const std::string& name,
                         const std::vector<std::string>& known);
RewardSpec parse_reward(const YamlField& field);
CatalogOptions parse_catalog_options(const YamlField& field);
// `live:` except `extra`, whose keys are env options (parse_env_options).
LiveSpec parse_live(const YamlField& field);

// A config-like text file read with the loader's limits (regular files only, at most 16 MiB);
// errors are ConfigErrors at (error_file, error_key, error_line).
std::string read_config_text(const std::string& path, const std::string& error_file,
                             const std::string& error_key, int error_line);
// YAML text → node; a syntax error is a ConfigError with its line.
YAML::Node parse_yaml_text(const std::string& text, const std::string& file);

// A section whose keys are options the registered envs declare under `prefix`
// ("live.extra"): unknown keys are refused naming the known ones, each value is read by its
// declared type and range (paths relative to `base_dir`) and set in `spec` (config_env.cpp).
void parse_env_options(const YamlField& section, const std::string& prefix,
                       const std::string& base_dir, ExperimentSpec& spec);
// The registration's check of the whole spec (validate_env_spec), its errors as ConfigErrors
// at the line of the key they name (or of its closest present parent).
void validate_env(const YamlField& root, const ExperimentSpec& spec);
// 1-based line of a dotted key ("live.extra.lr") in the file, or of its deepest present parent.
int line_of_key(const YamlField& root, const std::string& key);

// Short dtype keys used in `peak_tflops: {bf16: ..., fp32: ...}`.
std::string dtype_key(DType dtype);

}  // namespace config_detail
}  // namespace shardgym
