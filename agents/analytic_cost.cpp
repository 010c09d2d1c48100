#include "agents/analytic_cost.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace shardgym {

double collective_time_s(const Collective& c, const Strategy& s, const ModelSpec& model,
                         const CommMatrix& matrix) {
  const int p = c.group_size;
  if (p <= 1 || c.elements <= 0) return 0;
  const int world = matrix.world;
  const double bytes = c.elements_sent_per_rank() * dtype_bytes(model.dtype);
  const int steps = c.op == CollOp::kAllReduce ? 2 * (p - 1) : p - 1;
  double worst = 0;
  std::set<std::vector<int>> seen;
  for (int r = 0; r < world; ++r) {
    std::vector<int> group = comm_group(s, c.axis, r, world);
    if (group.size() <= 1 || !seen.insert(group).second) continue;
    double bw = std::numeric_limits<double>::infinity(), lat = 0;
    for (int i : group)
      for (int j : group)
        if (i != j) {
          bw = std::min(bw, matrix.bw(i, j));
          lat = std::max(lat, matrix.lat(i, j));
        }
    if (!(bw > 0)) throw std::invalid_argument("analytic cost: zero bandwidth inside a group");
    worst = std::max(worst, steps * lat + bytes / bw);
  }
  return worst;
}

AnalyticCost analytic_block_cost(const ModelSpec& model, const ClusterSpec& cluster,
                                 const CommMatrix& matrix, int block, const Strategy& s) {
  const int world = cluster.world_size();
  const BlockKind kind = ModelSpec::block_kind(block);
  double peak = std::numeric_limits<double>::infinity();
  for (int r = 0; r < world; ++r) peak = std::min(peak, cluster.device_of(r).peak_flops);
  AnalyticCost out;
  out.compute_s = block_rank_flops(model, kind, s, world) / peak;
  for (const Collective& c : block_collectives(model, kind, s, world))
    out.comm_s += collective_time_s(c, s, model, matrix);
  for (const Collective& c : block_grad_sync(model, kind, s, world))
    out.comm_s += collective_time_s(c, s, model, matrix);
  out.memory_bytes = block_rank_params(model, kind, s) * model.state_bytes_per_param();
  return out;
}

AnalyticCost analytic_plan_cost(const ModelSpec& model, const ClusterSpec& cluster,
                                const Plan& plan) {
  if (plan.size() != model.num_blocks())
    throw std::invalid_argument("analytic cost: plan has " + std::to_string(plan.size()) +
                                " blocks, model has " + std::to_string(model.num_blocks()));
  const CommMatrix matrix = cluster.comm_matrix();
  const int world = cluster.world_size();
  AnalyticCost total;
  for (int b = 0; b < plan.size(); ++b) {
    AnalyticCost c = analytic_block_cost(model, cluster, matrix, b, plan.blocks[b]);
    total.compute_s += c.compute_s;
    total.comm_s += c.comm_s;
    total.memory_bytes += c.memory_bytes;
  }
  for (int l = 0; l < model.layers; ++l)
    total.memory_bytes +=
        layer_activation_bytes(model, plan.blocks[2 * l], plan.blocks[2 * l + 1], world);
  return total;
}

}  // namespace shardgym
