// Where data lives under a strategy, and what it costs to move it to another strategy
// (DESIGN.md §4, "Repartition"; activation redistribution between blocks).
//
// Every piece a rank holds is an axis-aligned box of a tensor's index space, so "what must
// rank r receive" is |need_r| − |need_r ∩ have_r| per tensor, in closed form.
//
// Activations [sequences, positions, hidden] of a block's input (= its output):
//   dp:         rank r holds its G/P sequences, all positions, all hidden;
//   tp1d(t):    tp group g (ranks [g·t, (g+1)·t)) holds sequences [g·b, (g+1)·b), b = G·t/P,
//               replicated; with sp each rank holds positions [i·s/t, (i+1)·s/t), i = r mod t;
//   tp2d:       as tp1d for sequences, hidden sharded over the d2 axis ([N, h/d2]),
//               replicated over d1.
// Parameters of a block (in-weight [h, c], in-bias [c], out-weight [k, h], out-bias [h],
// LayerNorm [2, h]; c = 3h / ffn, k = h / ffn): tp1d shards in-weight columns and out-weight
// rows by i = r mod t (Megatron column / row parallel); tp2d places in-weight [h/d2, c/d1] and
// out-weight [k/d1, h/d2] by the rank's coordinates on the d1 and d2 axes (as cost.h's
// block_rank_params counts them). tp2d(d1=t, d2=1) holds exactly what tp1d(t) holds.
//
// Transfer time: each receiving rank pulls its missing bytes from the ranks that hold them,
// through its own link: time_r = max α + bytes_r / (lowest bandwidth among its sources);
// the step waits for the slowest rank.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"
#include "runtime/sim/collective_model.h"

namespace shardgym {

struct Box {
  double lo[3] = {0, 0, 0};
  double hi[3] = {1, 1, 1};
  double volume() const {
    double v = 1;
    for (int d = 0; d < 3; ++d) v *= hi[d] > lo[d] ? hi[d] - lo[d] : 0.0;
    return v;
  }
};
inline Box intersect(const Box& a, const Box& b) {
  Box c;
  for (int d = 0; d < 3; ++d) {
    c.lo[d] = a.lo[d] > b.lo[d] ? a.lo[d] : b.lo[d];
    c.hi[d] = a.hi[d] < b.hi[d] ? a.hi[d] : b.hi[d];
  }
  return c;
}

// Up to five tensors of one block (activations use the first only).
struct Holding {
  std::array<Box, 5> parts;
  int count = 0;
};

Holding activation_holding(const ModelSpec& m, const Strategy& s, int rank, int world);
Holding param_holding(const ModelSpec& m, BlockKind kind, const Strategy& s, int rank,
                      int world);

struct TransferCost {
  double time_s = 0;
  double bytes = 0;           // received, summed over ranks
  double max_rank_bytes = 0;  // received by the rank that receives most
  double energy_j = 0;        // bytes × energy_per_byte of the link they crossed
};

// Activations from `from`'s layout to `to`'s (one direction; call twice for fwd + bwd).
TransferCost redistribution_cost(const ModelSpec& m, const Strategy& from, const Strategy& to,
                                 const ClusterSpec& cluster, const LinkState& links);
// Parameters + optimizer state of one block moving from `from` to `to`; `bytes_per_param` is
// what travels per parameter (params and optimizer state, not gradients).
TransferCost repartition_cost(const ModelSpec& m, BlockKind kind, const Strategy& from,
                              const Strategy& to, double bytes_per_param,
                              const ClusterSpec& cluster, const LinkState& links);

// Canonical keys: equal keys ⇔ identical placement for every rank (equal activation keys:
// no redistribution needed; equal param keys: a change moves no bytes). chunks, recompute
// and (for parameters) sp do not change placement; dp ≡ tp1d(t=1), tp1d(t) ≡ tp2d(d1=t, d2=1).
uint32_t activation_layout_key(const Strategy& s);
uint32_t param_layout_key(const Strategy& s);

}  // namespace shardgym
