// ExchangePlan: move pieces of full tensors from one placement of boxes to another.
//
// Used twice: to redistribute residual-stream activations between blocks whose layouts differ
// (forward, and the reversed plan in backward), and to repartition parameters and AdamW state
// when a block changes strategy. Every rank builds the same global picture from the boxes of
// all ranks (runtime/core/placement.h), so no metadata travels; only the elements a rank lacks do.
//
// Who sends whom which cells is runtime/core/exchange_geometry.h (the simulator prices the same
// messages). Cells travelling between the same pair of ranks are packed into one message; pairs
// talk in the rounds of a round-robin tournament, lower rank sending first, which cannot
// deadlock. In transit a rank holds one message at a time (the buffer of a send is freed
// before the receive of the same round allocates its own).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "runtime/core/exchange_geometry.h"
#include "runtime/live/comm/comm.h"

namespace shardgym::live {

class ExchangePlan {
 public:
  ExchangePlan() = default;
  // Throws std::invalid_argument when a wanted element is held by no rank.
  ExchangePlan(std::vector<ExchangeItem> items, int rank, int world);

  // inputs[k]: this rank's have-box of item k (shape = its extents, any dtype common to all
  // items). Returns the want-boxes. Collective over `world` (the all-ranks group); ranks with
  // nothing to send or receive return without waiting. keep_unchanged: where this rank's
  // want-box is its have-box for every item, return the inputs themselves, not copies
  // (repartitions: a rank that keeps the whole block, such as a survivor when a group leaves,
  // allocates nothing for it).
  std::vector<at::Tensor> run(Comm& world, const std::vector<at::Tensor>& inputs,
                              bool keep_unchanged = false) const;

  // The plan that moves the want-layout back to the have-layout.
  ExchangePlan reversed() const;

  int64_t elements_received() const { return x_.elements_received; }
  int64_t elements_sent() const { return x_.elements_sent; }
  int rank() const { return rank_; }
  // True when every rank finds all it wants locally (no message at all).
  bool local_only() const { return x_.local_only; }

 private:
  std::vector<ExchangeItem> items_;  // one box per rank
  int rank_ = 0, world_ = 1;
  RankExchange x_;
};

// The part of `full` (a tensor holding `full_box`, by default the whole tensor) inside `box`.
at::Tensor box_view(const at::Tensor& t, const Box& t_box, const Box& box);
at::Tensor box_view(const at::Tensor& full, const Box& box);

// Rounds of a round-robin tournament over `world` ranks: rounds[r][q] = q's partner in round
// r, or -1 when q sits out. Every unordered pair meets exactly once.
std::vector<std::vector<int>> tournament_rounds(int world);

}  // namespace shardgym::live
