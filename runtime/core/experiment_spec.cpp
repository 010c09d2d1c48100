#include "runtime/core/experiment_spec.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/core/catalog.h"

namespace shardgym {

ExperimentSpec with_instance(ExperimentSpec spec, uint64_t instance) {
  spec.scenario.instance = instance;
  if (spec.scenario.draws.empty()) return spec;
  const std::string line = "instance: " + std::to_string(instance);
  std::string& text = spec.source_text;
  // A top-level key starts a line with no indentation.
  size_t at = text.rfind("\ninstance:", std::string::npos);
  if (text.compare(0, 9, "instance:") == 0) at = 0;
  else if (at != std::string::npos) ++at;
  if (at == std::string::npos) {
    text = line + "\n" + text;
  } else {
    const size_t end = text.find('\n', at);
    text.replace(at, end == std::string::npos ? std::string::npos : end - at, line);
  }
  return spec;
}

ExperimentSpec with_drawn_events(ExperimentSpec spec) {
  spec.scenario = spec.scenario.drawn();
  return spec;
}

Plan megatron_plan(const ModelSpec& model, const ClusterSpec& cluster, bool sp, int stages) {
  const int world = cluster.world_size();
  const int stage_world = world / std::max(1, stages);
  auto with_m = [&](Plan p) {
    if (stages > 1) p.pipeline.stages = stages;
    p.pipeline.micro_batches = plan_micro_batches(p, model, world);
    return p;
  };
  int t = stage_world;
  for (const auto& n : cluster.nodes) t = std::min(t, n.gpus);
  for (; t > 1; --t) {
    Plan p = with_m(Plan::uniform(Strategy::tp1d(t, sp), model.num_blocks()));
    if (p.validate(model, world).empty()) return p;
  }
  return with_m(Plan::uniform(Strategy::dp(), model.num_blocks()));
}

Plan resolve_plan(const std::string& text, const ModelSpec& model, const ClusterSpec& cluster) {
  if (text == "megatron") return megatron_plan(model, cluster, false);
  if (text == "megatron-sp") return megatron_plan(model, cluster, true);
  Plan p = Plan::parse(text, model.num_blocks());
  // Fixed for the episode from here on (Megatron-LM's rule for this plan where the text writes
  // no m): actions change strategies, not the micro-batch count (docs/configs.md).
  p.pipeline.micro_batches = plan_micro_batches(p, model, cluster.world_size());
  const std::string why = p.validate(model, cluster.world_size());
  if (!why.empty()) throw std::invalid_argument("plan '" + text + "': " + why);
  return p;
}

}  // namespace shardgym
