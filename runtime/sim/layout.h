// What it costs to move data between two strategies' placements (docs/design.md §4, "Repartition";
// activation redistribution between blocks).
//
// Where data lives is runtime/core/placement.h, the geometry the live runtime slices and
// repartitions with: every piece a rank holds is an integer box of a tensor's full index space.
// What rank r must receive is, per tensor, |want_r| − |want_r ∩ have_r| elements (box
// intersections, exact integers); the byte counts below are those element counts times the
// bytes per element, so they equal what the live exchange (runtime/live/tp/exchange.h)
// receives. Parameters: the six tensors of block_param_boxes (with their optimizer state:
// `bytes_per_param` covers them). Activations: block_activation_box of the residual stream
// [G, S, h] with G = effective_global_batch.
//
// Strategies without a placement: a plan the simulator is asked to price may hold a strategy
// whose degree does not divide its stage's world, or a dimension that does not split (such a
// plan is invalid and Plan::validate says why; the static baselines still price it to show it
// does not fit). Moving to or from such a layout is counted as free (zero bytes, zero time).
// A micro-batch with fewer sequences than replicas is priced by scaling (layout.cpp).
//
// Speed: boxes are built once per call; parameter boxes for the t mesh positions of a strategy
// only (a rank's boxes depend on its rank mod t, placement.h "Symmetry"), activation boxes per
// position and replica. SimRun caches the result per pair of layout keys, so each pair is
// computed once per run. With thousands of ranks the cost per pair is O(P·t) box overlaps.
//
// Memory in transit (repartition_cost's max_message_bytes): the live runtime moves one block at
// a time and holds one message at a time (runtime/live/tp/repartition.cpp), so what a rank holds
// on top of its state during a repartition is the block's new state plus that message, after
// what the blocks before it freed. SimRun adds those up (repartition_peak_bytes in Measurement).
// With uneven tensor-parallel shards (docs/design.md §11) the ranks of a tensor group hold
// different amounts, so the sum is kept per rank: repartition_cost then lists each rank's
// parameter elements before and after, its largest message, and whether it keeps every box
// (the live exchange then keeps its tensors and allocates nothing).
//
// Transfer time (unchanged α–β model): each receiving rank pulls its missing bytes from the
// ranks that hold them, through its own link: time_r = max α + bytes_r / (lowest bandwidth
// among its sources); the step waits for the slowest rank.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"
#include "runtime/sim/collective_model.h"

namespace shardgym {

// One rank's part of a repartition (TransferCost::rank_moves).
struct RankMove {
  double message_bytes = 0;                   // its largest message, sent or received
  double old_elements = 0, new_elements = 0;  // parameter elements it holds before and after
  bool keeps = false;                         // every box unchanged: it keeps its tensors
};

struct TransferCost {
  double time_s = 0;
  double bytes = 0;           // received, summed over ranks
  double max_rank_bytes = 0;  // received by the rank that receives most
  double energy_j = 0;        // bytes × energy_per_byte of the link they crossed
  // Repartitions: the largest message any rank sends or receives, in bytes (the live
  // exchange's messages, runtime/core/exchange_geometry.h: one per pair of ranks and block).
  double max_message_bytes = 0;
  int max_rank_messages = 0;  // repartitions: the most messages one rank sends and receives
  // Repartitions from or to an uneven layout: one entry per rank of the world (what differs
  // between ranks, for memory in transit); empty otherwise, where every rank holds as many
  // elements as every other.
  std::vector<RankMove> rank_moves;
};

// Activations from `from`'s layout to `to`'s (one direction; call twice for fwd + bwd).
TransferCost redistribution_cost(const ModelSpec& m, const Strategy& from, const Strategy& to,
                                 const ClusterSpec& cluster, const LinkState& links);
// Parameters + optimizer state of one block moving from `from` to `to`; `bytes_per_param` is
// what travels per parameter (params and optimizer state, not gradients).
TransferCost repartition_cost(const ModelSpec& m, BlockKind kind, const Strategy& from,
                              const Strategy& to, double bytes_per_param,
                              const ClusterSpec& cluster, const LinkState& links);

// The same for a block that changes pipeline stage (a boundary move, or a new stage count):
// from `from` over the global ranks [from_first, from_first + from_size) to `to` over
// [to_first, to_first + to_size), a rank outside a stage holding nothing of the block there,
// as the live repartition moves it (runtime/live/tp/repartition.cpp). The same box
// arithmetic over the world; rank_moves lists every rank. O(P) boxes per tensor: SimRun
// caches it per move.
TransferCost stage_move_cost(const ModelSpec& m, BlockKind kind, const Strategy& from,
                             int from_first, int from_size, const Strategy& to, int to_first,
                             int to_size, double bytes_per_param, const ClusterSpec& cluster,
                             const LinkState& links);

// Elements rank r receives (index r of the result) in the moves above: the same box
// arithmetic that their byte counts use (parameters: per optimizer-state tensor too).
std::vector<int64_t> redistribution_elements(const ModelSpec& m, const Strategy& from,
                                             const Strategy& to, int world);
std::vector<int64_t> repartition_elements(const ModelSpec& m, BlockKind kind, const Strategy& from,
                                          const Strategy& to, int world);

// Canonical keys: equal keys ⇔ identical placement for every rank (equal activation keys:
// no redistribution needed; equal param keys: a change moves no bytes). chunks, recompute
// and (for parameters) sp do not change placement; dp ≡ tp1d(t=1), tp1d(t) ≡ tp2d(d1=t, d2=1).
uint32_t activation_layout_key(const Strategy& s);
uint64_t param_layout_key(const Strategy& s);
// Exact packing of the fields that Strategy::operator== compares: equal keys ⇔ equal
// strategies, or kUnpackable when a field is too large for its bits (such strategies are
// looked up by comparison). The simulator's caches index strategies by it.
constexpr uint64_t kUnpackable = ~uint64_t(0);
uint64_t strategy_key(const Strategy& s);

}  // namespace shardgym
