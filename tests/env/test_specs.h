// Small ExperimentSpecs for tests: a tiny GPT on a one- or two-node cluster of made-up GPUs,
// cheap enough for the simulator, a fake run or a threaded live run on a CPU.
//
//   ExperimentSpec spec = test_specs::tiny();                  // 2 layers, 4 GPUs, one node
//   ExperimentSpec two = test_specs::tiny(/*layers=*/4, /*gpus_per_node=*/4, /*nodes=*/2);
//   test_specs::add_link_drop(spec, /*step=*/3, "nvlink", 0.25);
#pragma once

#include <algorithm>
#include <string>

#include "runtime/core/experiment_spec.h"

namespace shardgym::test_specs {

// A GPT small enough for a live CPU run: hidden 64, 4 heads, seq 32, micro-batch 2, fp32.
inline ModelSpec tiny_model(int layers = 2) {
  ModelSpec m = ModelSpec::gpt(layers, /*hidden=*/64, /*heads=*/4, /*seq=*/32, /*micro_batch=*/2);
  m.name = "tiny-gpt";
  m.vocab = 256;
  m.dtype = DType::kFloat32;
  m.mixed_precision = false;
  return m;
}

// `nodes` nodes of `gpus_per_node` "test-gpu" devices (16 GB, 100 TFLOP/s) on "nvlink";
// nodes talk over "eth".
inline ClusterSpec tiny_cluster(int gpus_per_node = 4, int nodes = 1) {
  ClusterSpec c;
  c.name = std::to_string(nodes) + "x" + std::to_string(gpus_per_node) + "-test";
  c.devices.push_back({"test-gpu", 1e14, 16e9, 1e12, 50.0, 300.0});
  c.links.push_back({"nvlink", 1e11, 2e-6, 1e-11});
  c.links.push_back({"eth", 1.25e9, 2e-5, 5e-11});
  for (int n = 0; n < nodes; ++n) c.nodes.push_back({"test-gpu", gpus_per_node, "nvlink"});
  c.inter_link = nodes > 1 ? "eth" : "";
  return c;
}

inline ExperimentSpec tiny(int layers = 2, int gpus_per_node = 4, int nodes = 1) {
  ExperimentSpec s;
  s.name = "test-tiny";
  s.model = tiny_model(layers);
  s.cluster = tiny_cluster(gpus_per_node, nodes);
  s.scenario = Scenario{};
  s.initial_plan = "megatron";
  s.episodes = 1;
  s.steps_per_episode = 20;
  s.seeds = {0};
  s.live.ranks = gpus_per_node * nodes;
  s.live.launch = "threads";
  s.live.timeout_s = 30;
  return s;
}

// `layers` layers on 4 GPUs of one node in `stages` pipeline stages (tp1d(t=2) within a
// stage of 2 ranks when stages = 2), m = 4 micro-batches, 1F1B, even split.
inline ExperimentSpec pipelined(int layers = 8, int stages = 2) {
  ExperimentSpec s = tiny(layers);
  s.model.global_batch = 16;
  const int t = std::max(1, 4 / stages);
  s.initial_plan = "uniform:" + std::string(t > 1 ? "tp1d(t=" + std::to_string(t) + ")" : "dp") +
                   "@pp(p=" + std::to_string(stages) + ",m=4)";
  return s;
}

// Appends an event and keeps the events sorted by step.
inline void add_event(ExperimentSpec& spec, const ScenarioEvent& e) {
  auto& ev = spec.scenario.events;
  auto it = ev.begin();
  while (it != ev.end() && it->step <= e.step) ++it;
  ev.insert(it, e);
  if (spec.scenario.name == "static") spec.scenario.name = "test-dynamics";
}

inline void add_link_drop(ExperimentSpec& spec, int step, const std::string& link, double factor) {
  ScenarioEvent e;
  e.step = step;
  e.kind = EventKind::kLinkBandwidth;
  e.target = link;
  e.factor = factor;
  add_event(spec, e);
}

inline void add_seq_change(ExperimentSpec& spec, int step, int seq) {
  ScenarioEvent e;
  e.step = step;
  e.kind = EventKind::kSeqLength;
  e.value = seq;
  add_event(spec, e);
}

}  // namespace shardgym::test_specs
