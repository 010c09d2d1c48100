// Experiment configs: YAML file → ExperimentSpec, checked completely before any work starts.
//
// Every problem is reported as a ConfigError naming the file, the key path
// (`cluster.nodes[1].gpus`), the 1-based line and what is wrong: unknown keys (with the
// closest known key), wrong types, missing required keys, out-of-range values, unknown
// device / link / agent / env names, plans that do not parse, have the wrong number of blocks
// or do not divide the model's shapes, and clusters whose world size does not add up.
// The schema is documented in docs/configs.md; experiments/*.yaml are working examples.
//
//   ExperimentSpec spec = load_experiment("experiments/quickstart.yaml");
//
// A config may `include:` hardware catalogs (files with `devices:` and `links:` lists, path
// relative to the including file) so that datasheet figures are written once
// (experiments/hardware.yaml). Only the devices and links the cluster uses are kept.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/model_spec.h"

namespace shardgym {

class ConfigError : public std::runtime_error {
 public:
  // what() is "<file>:<line>: <key>: <reason>" (parts that are unknown are left out).
  ConfigError(std::string file, std::string key, int line, std::string reason);

  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }  // "" when the error is not about one key
  int line() const { return line_; }               // 1-based; 0 when unknown
  const std::string& reason() const { return reason_; }

 private:
  std::string file_, key_, reason_;
  int line_ = 0;
};

// Reads and validates one experiment config. Throws ConfigError (also for unreadable files
// and YAML syntax errors).
ExperimentSpec load_experiment(const std::string& path);

// Same from text; `file` is used in messages and `base_dir` resolves `include:` paths.
ExperimentSpec parse_experiment(const std::string& text, const std::string& file,
                                const std::string& base_dir = ".");

// A config as recorded in a trace (ExperimentSpec::source_text): the hardware files it
// includes and its calibration file are read from the commented copies the text carries
// (`# ---- included NAME ----`), never from disk, so that a trace reads nothing outside
// itself. A file the text does not carry is a ConfigError. `base_dir` resolves what the
// config names to run (replay_trace, live.extra's corpus), as in parse_experiment.
ExperimentSpec parse_recorded_experiment(const std::string& text, const std::string& file,
                                         const std::string& base_dir);

// A device & link catalog file (`devices:` / `links:`). Peak FLOP/s are taken for `dtype`.
struct HardwareCatalog {
  std::vector<DeviceType> devices;
  std::vector<LinkClass> links;
};
HardwareCatalog load_hardware_catalog(const std::string& path, DType dtype = DType::kBFloat16);

// The known name closest to `name` by edit distance, or "" when none is close enough to be
// a plausible typo. Used for "did you mean" hints.
std::string closest_name(const std::string& name, const std::vector<std::string>& known);

}  // namespace shardgym
