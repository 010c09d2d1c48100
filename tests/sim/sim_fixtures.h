// Clusters and models for the simulator tests, built in C++ (the YAML configs live under
// experiments/). Figures are vendor datasheet values.
#pragma once

#include <string>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/model_spec.h"

namespace shardgym::testing {

inline DeviceType h100_sxm() {
  return {"H100-SXM5-80GB", 989e12, 80e9, 3.35e12, 100, 700};
}
inline DeviceType a100_pcie() {
  return {"A100-PCIe-80GB", 312e12, 80e9, 1.94e12, 50, 300};
}

inline LinkClass nvswitch() { return {"nvswitch", 450e9, 3e-6, 8e-12}; }
// PCIe 4.0 x16 through the CPU root complex: ~25 GB/s effective per direction.
inline LinkClass pcie4() { return {"pcie4", 25e9, 10e-6, 30e-12}; }
inline LinkClass ib_ndr() { return {"ib-ndr", 50e9, 5e-6, 60e-12}; }

// `nodes` nodes of `gpus` GPUs each, one device type, intra link `intra`, InfiniBand between.
inline ClusterSpec cluster(int nodes, int gpus, const DeviceType& dev, const LinkClass& intra) {
  ClusterSpec c;
  c.name = std::to_string(nodes) + "x" + std::to_string(gpus) + "-" + dev.name + "-" + intra.name;
  c.devices = {dev};
  c.links = {intra, ib_ndr()};
  for (int i = 0; i < nodes; ++i) c.nodes.push_back({dev.name, gpus, intra.name});
  c.inter_link = nodes > 1 ? "ib-ndr" : "";
  return c;
}

// A GPT-3-like shape scaled to `layers`; hidden 8192 as in the ATP paper's large models.
inline ModelSpec gpt(int layers, int hidden, int heads, int seq, int micro_batch) {
  ModelSpec m = ModelSpec::gpt(layers, hidden, heads, seq, micro_batch);
  m.name = "gpt-h" + std::to_string(hidden);
  return m;
}

inline ExperimentSpec experiment(const ModelSpec& m, const ClusterSpec& c) {
  ExperimentSpec s;
  s.name = "sim-test";
  s.model = m;
  s.cluster = c;
  s.initial_plan = "megatron";
  return s;
}

}  // namespace shardgym::testing
