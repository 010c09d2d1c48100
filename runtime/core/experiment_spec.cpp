#include "runtime/core/experiment_spec.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/core/catalog.h"

namespace shardgym {

Plan megatron_plan(const ModelSpec& model, const ClusterSpec& cluster, bool sp) {
  const int world = cluster.world_size();
  int t = world;
  for (const auto& n : cluster.nodes) t = std::min(t, n.gpus);
  for (; t > 1; --t) {
    const Strategy s = Strategy::tp1d(t, sp);
    if (strategy_invalid_reason(s, model, BlockKind::kAttention, world).empty() &&
        strategy_invalid_reason(s, model, BlockKind::kMlp, world).empty())
      break;
  }
  const Strategy s = t > 1 ? Strategy::tp1d(t, sp) : Strategy::dp();
  return Plan::uniform(s, model.num_blocks());
}

Plan resolve_plan(const std::string& text, const ModelSpec& model, const ClusterSpec& cluster) {
  if (text == "megatron") return megatron_plan(model, cluster, false);
  if (text == "megatron-sp") return megatron_plan(model, cluster, true);
  Plan p = Plan::parse(text, model.num_blocks());
  const std::string why = p.validate(model, cluster.world_size());
  if (!why.empty()) throw std::invalid_argument("plan '" + text + "': " + why);
  return p;
}

}  // namespace shardgym
