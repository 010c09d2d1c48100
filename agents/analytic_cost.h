// Closed-form α–β cost of a plan on the hierarchical communication matrix, for planners on
// runs that cannot estimate (live): ATP's planner ranks meshes with exactly this kind of
// model (its "hierarchical communication matrix" cost), so the baseline keeps working there.
//
// Per block: compute = per-rank FLOPs / slowest device's peak; each collective of
// block_collectives + block_grad_sync is a flat ring on the group's bottleneck link
// (all-reduce 2(p−1) steps, all-gather / reduce-scatter p−1 steps, α per step, sent bytes
// over the slowest bandwidth in the group), worst group over all ranks. No overlap, no noise.
// Memory per rank: parameters × state bytes / degree + Korthikanti activations.
#pragma once

#include "runtime/core/cluster_spec.h"
#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"

namespace shardgym {

struct AnalyticCost {
  double compute_s = 0;
  double comm_s = 0;
  double memory_bytes = 0;  // per rank (ranks are symmetric under this model)
  double total_s() const { return compute_s + comm_s; }
};

// Time of one collective for the group that `axis` forms around each rank; the slowest one.
double collective_time_s(const Collective& c, const Strategy& s, const ModelSpec& model,
                         const CommMatrix& matrix);

AnalyticCost analytic_block_cost(const ModelSpec& model, const ClusterSpec& cluster,
                                 const CommMatrix& matrix, int block, const Strategy& s);
AnalyticCost analytic_plan_cost(const ModelSpec& model, const ClusterSpec& cluster,
                                const Plan& plan);

}  // namespace shardgym
