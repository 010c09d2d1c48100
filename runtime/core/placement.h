// Placement geometry: which piece of every tensor each rank holds under a block's strategy.
//
// This is the one geometry of the project. The live runtime slices its parameters, AdamW
// state and activations with it and derives every repartition / redistribution exchange from
// it (runtime/live/tp/exchange.h); the simulator counts the bytes of the same repartitions and
// redistributions from it (runtime/sim/layout.h: what a rank lacks = its wanted box minus the
// part of it the rank already holds, summed over tensors), and the per-rank parameter (state)
// elements. Standard library only, no LibTorch.
//
// Every tensor of the model has a *full* (unpartitioned) shape, the one of the single-rank
// reference GPT. A rank holds one axis-aligned Box of it. Boxes of different ranks are either
// identical (replicas) or disjoint. Because the boxes of every rank can be computed on every
// rank, moving between layouts needs no negotiation: each rank derives who sends it what.
//
// A block's strategy places rank q on a mesh (runtime/core/cost.h comm_group, so the simulator's
// collectives, the live run's groups and these boxes agree on group membership):
//   G1 = comm_group(kMeshD1), n1 = |G1|, i1 = q's index in G1   (tp1d: the t tensor ranks)
//   G2 = comm_group(kMeshD2), n2 = |G2|, i2 = q's index in G2   (tp1d and dp: {q})
//   replica = q / t of R = P / t replicas; the replica takes batch rows [replica·G/R, ...).
// One block code serves dp (n1 = n2 = 1), tp1d (n2 = 1) and tp2d; the partition math is in
// runtime/live/tp/tp_block.h. Parameter boxes (full shapes use Y = X·A, A[in, out]; QKV columns
// head-major):
//   ln.{weight,bias}[h]    slice i2 of n2          qkv.weight[h,3h]  rows i2/n2, cols i1/n1
//   qkv.bias[3h]           slice i1·n2+i2 of t     proj.weight[h,h]  rows i1/n1, cols i2/n2
//   proj.bias[h]           slice i2 of n2          fc1.weight[h,f]   rows i2/n2, cols i1/n1
//   fc1.bias[f]            slice i1 of n1          fc2.weight[f,h]   rows i1/n1, cols i2/n2
//   fc2.bias[h]            slice i2 of n2
// Optimizer state: AdamW's exp_avg and exp_avg_sq of a parameter have the parameter's box (the
// live repartition moves the three tensors with one exchange plan), so a block's state on a
// rank is block_param_elements() times the bytes per parameter (ModelSpec::state_bytes_per_param).
// Residual-stream activation [G, S, h] of the block: batch rows of its replica, sequence slice
// i1 of t with sp=1, hidden slice i2 of n2; replicated over the remaining ranks of its group.
//
// Symmetry (what keeps the simulator fast for thousands of ranks): comm_group forms tensor
// groups of t consecutive ranks and places a rank on the mesh by its position q mod t only, so
// every parameter box depends on q mod t alone, and an activation box on q mod t and the
// replica q / t (batch rows). place_block_mesh() computes the mesh position without the data
// group (O(t) work, not O(P/t)).
//
// Length: the one placement geometry, used by both the live runtime and the simulator.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"

namespace shardgym {

// Half-open index ranges [lo[d], hi[d]) per dimension of a full tensor.
struct Box {
  std::vector<int64_t> lo, hi;

  static Box whole(const std::vector<int64_t>& shape);
  int dims() const { return static_cast<int>(lo.size()); }
  int64_t extent(int d) const { return hi[d] - lo[d]; }
  std::vector<int64_t> extents() const;
  int64_t numel() const;
  bool empty() const { return numel() == 0; }
  bool contains(const Box& o) const;
  Box intersect(const Box& o) const;  // may be empty
  // numel() of intersect(o) / of the intersection of three boxes, without building them.
  int64_t overlap(const Box& o) const;
  int64_t overlap(const Box& o, const Box& p) const;
  bool operator==(const Box& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const Box& o) const { return !(*this == o); }
  std::string to_string() const;
};

// Rank q's place in one block's strategy.
struct BlockPlacement {
  Strategy strategy;
  int world = 1, rank = 0;
  std::vector<int> g1, g2;  // sorted global ranks; size 1 means "no collective on this axis"
  std::vector<int> data;    // the replicas of q's shard (kData), sums weight gradients
  int n1 = 1, n2 = 1, i1 = 0, i2 = 0;
  int t = 1, replica = 0, replicas = 1;
  bool sp = false;
};

// Throws std::invalid_argument when the strategy does not fit the world, std::runtime_error
// when comm_group's groups do not form a d1×d2 mesh.
BlockPlacement place_block(const Strategy& s, int rank, int world);
// The same without the data group (`data` left empty): all the boxes need.
BlockPlacement place_block_mesh(const Strategy& s, int rank, int world);

// One parameter of a block as rank q holds it.
struct ParamShard {
  std::string name;                 // full name, e.g. "h.0.attn.qkv.weight"
  std::vector<int64_t> full_shape;  // as in the reference GPT
  Box box;                          // q's piece
  bool tp_replicated = false;       // the same box on every rank of q's tensor group
  bool decay = false;               // AdamW weight decay applies (matrices only)
};

// Heads [lo, hi) that rank i of s's tensor group holds (the even split's t-th parts, or s.heads'
// prefix sums). Throws std::invalid_argument when the split does not fit the model: the degree
// does not divide the heads or the kv_heads (query groups), s.heads does not sum to them or
// gives a rank part of a query group, or the FFN columns do not split by head (an uneven MLP
// takes f/heads columns per head).
std::pair<int64_t, int64_t> head_range(const ModelSpec& m, const Strategy& s, int i);

// Parameters of block `block` (names "h.<layer>.attn.*" / "h.<layer>.mlp.*") in a fixed order:
// ln.weight, ln.bias, then qkv.weight, qkv.bias, proj.weight, proj.bias (attention) or
// fc1.weight, fc1.bias, fc2.weight, fc2.bias (MLP); ln.bias goes with RMSNorm and the other
// biases without linear_bias (model_spec.h). Throws std::invalid_argument when a dimension
// does not split evenly.
std::vector<ParamShard> block_param_shards(const ModelSpec& m, int block, const BlockPlacement& p);
// Just the boxes, same order (no names; what the simulator needs).
std::vector<Box> block_param_boxes(const ModelSpec& m, BlockKind kind, const BlockPlacement& p);
// Parameter elements of one block on rank p.rank (= elements of each optimizer-state tensor).
int64_t block_param_elements(const ModelSpec& m, BlockKind kind, const BlockPlacement& p);

// Parameter elements the fullest rank of strategy s holds of a block (all ranks hold equally
// many unless s is uneven), from the boxes of rank 0 (uneven: of the rank with most heads). A strategy whose dimensions do not split
// evenly has no boxes (no run can use it); for it this returns cost.h's fractional closed form
// block_rank_params, which equals the box count wherever boxes exist (placement_test).
double rank_param_elements(const ModelSpec& m, BlockKind kind, const Strategy& s);
// The same for the rank at position `pos` of its tensor group (0 <= pos < s.degree()).
double rank_param_elements(const ModelSpec& m, BlockKind kind, const Strategy& s, int pos);

// Ranks whose gradients of this parameter must be summed: the replicas, and with sp=1 also the
// tensor group for tp_replicated parameters (each rank saw only its sequence slice).
std::vector<int> grad_sum_ranks(const BlockPlacement& p, const ParamShard& shard);

// The rows of one batch (or micro-batch) by data-parallel share group (data_shares.h), in
// group order: group i takes rows [offset(i), offset(i) + rows[i]). Without shares there is one
// group of all G rows. A group's rows split evenly over the replicas inside it, so with one
// group replica r of R takes [r·G/R, (r+1)·G/R) as before.
struct BatchRows {
  std::vector<int64_t> rows;  // per group, ≥ 0

  static BatchRows whole(int64_t global_batch) { return BatchRows{{global_batch}}; }
  int64_t total() const;
  // Rows [lo, hi) of part `part` of `parts`, parts numbered group-major: each group's rows in
  // parts/n equal pieces. Throws std::invalid_argument (with `what`) when n does not divide
  // `parts` or a group's rows do not split evenly.
  std::pair<int64_t, int64_t> part(int part, int parts, const char* what) const;
  bool operator==(const BatchRows& o) const { return rows == o.rows; }
  bool operator<(const BatchRows& o) const { return rows < o.rows; }
};

// The residual-stream box [G, S, h] a block with placement p reads and writes.
Box block_activation_box(const ModelSpec& m, const BlockPlacement& p, int64_t global_batch);
// The same with the batch's rows split between share groups (G = rows.total()).
Box block_activation_box(const ModelSpec& m, const BlockPlacement& p, const BatchRows& rows);
// Embedding output / LM-head input: data parallel over all P ranks (rank q: batch slice q).
Box data_parallel_activation_box(const ModelSpec& m, int rank, int world, int64_t global_batch);
// The same with share groups: rank q of group i takes slice q mod g of the group's rows.
Box data_parallel_activation_box(const ModelSpec& m, int rank, int world, const BatchRows& rows);

// Parameters outside the blocks (wte, wpe, ln_f.*, lm_head.weight; those the model's traits
// have, as embedding_params() counts them): replicated on every rank.
std::vector<ParamShard> outer_param_shards(const ModelSpec& m);

}  // namespace shardgym
