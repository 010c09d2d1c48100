// Shared by the scenario tests: a small experiment config around a `scenario:` section.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "experiments/config.h"

namespace shardgym::testing {

// A 2-layer model on one node of 4 GPUs (link `l`) or, with `two_nodes`, two such nodes joined
// by link `ib`, followed by `scenario:` and `scenario`.
inline std::string scenario_config(const std::string& scenario, bool two_nodes = false) {
  const std::string links =
      two_nodes ? "  links: [{name: l, bandwidth_gbs: 100, latency_us: 5},\n"
                  "          {name: ib, bandwidth_gbs: 25, latency_us: 5}]\n"
                  "  nodes: [{device: d, gpus: 4, intra_link: l, count: 2}]\n"
                  "  inter_link: ib\n"
                : "  links: [{name: l, bandwidth_gbs: 100, latency_us: 5}]\n"
                  "  nodes: [{device: d, gpus: 4, intra_link: l}]\n";
  return "model: {layers: 2, hidden: 64, heads: 4, seq: 256, micro_batch: 1, global_batch: 8}\n"
         "cluster:\n"
         "  devices: [{name: d, peak_tflops: {bf16: 100}, memory_gib: 80, memory_bw_gbs: 2000,\n"
         "             idle_w: 50, busy_w: 400}]\n" +
         links + "scenario:\n" + scenario;
}

inline ExperimentSpec load_scenario(const std::string& scenario, bool two_nodes = false) {
  return parse_experiment(scenario_config(scenario, two_nodes), "s.yaml", ".");
}

// `scenario` is refused at `key`, with a line.
inline void expect_scenario_error(const std::string& scenario, const std::string& key,
                                  bool two_nodes = false) {
  try {
    load_scenario(scenario, two_nodes);
    ADD_FAILURE() << "accepted: " << scenario;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_GT(e.line(), 0);
  }
}

}  // namespace shardgym::testing
