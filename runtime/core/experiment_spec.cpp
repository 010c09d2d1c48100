#include "runtime/core/experiment_spec.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/core/catalog.h"

namespace shardgym {

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
  // Fixed for the episode from here on: actions change strategies, not the micro-batch count.
  p.pipeline.micro_batches = plan_micro_batches(p, model, cluster.world_size());
  const std::string why = p.validate(model, cluster.world_size());
  if (!why.empty()) throw std::invalid_argument("plan '" + text + "': " + why);
  return p;
}

}  // namespace shardgym
