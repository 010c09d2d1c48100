// Strategy: how one Transformer block is split across the P ranks (docs/design.md §3).
//
//   dp                              replicated, batch split P ways
//   tp1d(t=4)                       Megatron 1D of degree t, P/t replicas split the batch
//   tp1d(t=4,sp=1)                  + sequence parallelism
//   tp2d(d1=2,d2=4,first=row)       ATP 2D on a d1×d2 mesh (t = d1·d2)
//   ...,chunks=2 / ...,recompute=1  chunked overlap / full activation recomputation
//   ...,recompute=sel               selective recomputation (Korthikanti et al. 2022): only the
//                                   attention core (QKᵀ, softmax, dropout, ·V) is recomputed
//
// `parse(to_string(s)) == s` for every strategy; parse rejects anything else with a message
// that says which part is wrong. Options are printed in a fixed order so strings compare.
#pragma once

#include <string>

namespace shardgym {

enum class StrategyKind { kDP, kTP1D, kTP2D };

struct Strategy {
  StrategyKind kind = StrategyKind::kDP;
  int t = 1;               // tp1d degree
  int d1 = 1, d2 = 1;      // tp2d mesh: axis 0 (strided) × axis 1 (consecutive ranks)
  bool row_first = true;   // tp2d: first=row | first=col
  bool sp = false;         // tp1d only
  int chunks = 1;          // ATP chunk-based overlap, k ≥ 1
  bool recompute = false;  // full activation recomputation of the block
  bool selective = false;  // selective recomputation (attention core only); excludes recompute

  // Ranks that hold one copy of the block: 1 for dp, t for tp1d, d1·d2 for tp2d.
  int degree() const;
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
