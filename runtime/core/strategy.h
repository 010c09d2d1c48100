// Strategy: how one Transformer block is split across the P ranks (docs/design.md §3).
//
//   dp                              replicated, batch split P ways
//   tp1d(t=4)                       Megatron 1D of degree t, P/t replicas split the batch
//   tp1d(t=4,sp=1)                  + sequence parallelism
//   tp1d(t=4,heads=5/5/5/1)         uneven shards: rank i of each tensor group holds heads_i
//                                   attention heads (Σ = the model's heads) and, in the MLP,
//                                   the same share of the FFN columns (f·heads_i/heads); the
//                                   group's collectives are those of the even split (their
//                                   messages carry the full hidden width or a sequence slice)
//   tp2d(d1=2,d2=4,first=row)       ATP 2D on a d1×d2 mesh (t = d1·d2)
//   ...,chunks=2 / ...,recompute=1  chunked overlap / full activation recomputation
//   ...,recompute=sel               selective recomputation (Korthikanti et al. 2022): only the
//                                   attention core (QKᵀ, softmax, dropout, ·V) is recomputed
//
// `parse(to_string(s)) == s` for every strategy; parse rejects anything else with a message
// that says which part is wrong. Options are printed in a fixed order so strings compare.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardgym {

enum class StrategyKind { kDP, kTP1D, kTP2D };

// Distinct uneven head splits one process can name (Strategy::heads_id); each list is kept
// for the process's lifetime.
constexpr uint32_t kMaxUnevenSplits = 1u << 16;

struct Strategy {
  StrategyKind kind = StrategyKind::kDP;
  int t = 1;               // tp1d degree
  int d1 = 1, d2 = 1;      // tp2d mesh: axis 0 (strided) × axis 1 (consecutive ranks)
  bool row_first = true;   // tp2d: first=row | first=col
  bool sp = false;         // tp1d only
  int chunks = 1;          // ATP chunk-based overlap, k ≥ 1
  bool recompute = false;  // full activation recomputation of the block
  bool selective = false;  // selective recomputation (attention core only); excludes recompute
  // tp1d only: the uneven split, as an id of its interned head counts (heads() below); 0 = the
  // even split. An id keeps Strategy a plain value (copied and compared in the simulator's hot
  // path) and names equal lists alike, so packed keys can carry it.
  uint32_t heads_id = 0;

  // Ranks that hold one copy of the block: 1 for dp, t for tp1d, d1·d2 for tp2d.
  int degree() const;
  // Attention heads per rank of the tensor group, in group order (size t, each ≥ 1, Σ = the
  // model's heads); empty for the even split. The MLP's FFN columns follow the same shares.
  // Whether Σ matches a model is checked where the model is known (catalog.h, placement.h).
  const std::vector<int>& heads() const;
  bool uneven() const { return heads_id != 0; }
  // Rank i of the tensor group: its head-split work (heads, FFN columns, their GEMMs and
  // parameters) over the even split's, t·heads_i/Σheads; 1 for an even strategy.
  double part(int i) const;
  // The largest part of any rank (the one that bounds memory and the group's time).
  double max_part() const;
  // Sets the uneven split, or clears it when every count is equal (one spelling per strategy).
  // Throws std::length_error past kMaxUnevenSplits distinct lists in one process.
  void set_heads(const std::vector<int>& counts);

  // Replicas (data-parallel copies) in a world of P ranks: P / degree().
  int replicas(int world) const { return world / degree(); }

  std::string to_string() const;
  static Strategy parse(const std::string& text);  // throws std::invalid_argument

  static Strategy dp() { return {}; }
  static Strategy tp1d(int t, bool sp = false);
  static Strategy tp2d(int d1, int d2, bool row_first);

  bool operator==(const Strategy& o) const;
  bool operator!=(const Strategy& o) const { return !(*this == o); }
};

}  // namespace shardgym
