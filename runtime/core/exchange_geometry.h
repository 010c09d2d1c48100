// Exchange geometry: who sends whom which pieces when tensors move from one placement of boxes
// to another (runtime/core/placement.h). Standard library only, no LibTorch.
//
// The live runtime runs these exchanges (runtime/live/tp/exchange.h: the residual stream
// between blocks of different layouts, and a block's parameters and AdamW state when it changes
// strategy); the simulator prices the largest message of a repartition from the same rule
// (runtime/sim/layout.h), which is what a rank holds in transit on top of its state.
//
// The rule. For each item, the full tensor is cut into grid cells along every box boundary of
// every rank. A cell that rank d wants is copied locally when d already holds it; otherwise it
// comes from one holder, the nearest rank by |q − d|, ties to the lower rank. Cells travelling
// between the same pair of ranks form one message.
//
// Periodic layouts. An item may list fewer boxes than there are ranks: rank q then holds
// have[q mod have.size()] (and likewise want). Parameter boxes repeat every t ranks (placement.h,
// "Symmetry"), so the simulator lists t boxes instead of thousands. The nearest holder is then
// within have.size() − 1 ranks of d, so the search stops there; with one box per rank it is the
// whole world. Both give the same answer (exchange_geometry_test).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/placement.h"

namespace shardgym {

// One tensor: the box each rank holds now and the box each rank must hold afterwards.
struct ExchangeItem {
  std::vector<int64_t> full_shape;
  std::vector<Box> have;  // rank q holds have[q % have.size()]
  std::vector<Box> want;  // rank q must end with want[q % want.size()]

  const Box& have_of(int q) const { return have[static_cast<size_t>(q) % have.size()]; }
  const Box& want_of(int q) const { return want[static_cast<size_t>(q) % want.size()]; }

  // An item whose full shape is the far corner of `have` (a layout covers the whole tensor).
  static ExchangeItem covering(std::vector<Box> have, std::vector<Box> want);
};

struct ExchangeCell {
  int item = 0;
  Box box;
};

// Rank `rank`'s part of an exchange.
struct RankExchange {
  std::vector<ExchangeCell> local;              // cells it copies from itself
  std::vector<std::vector<ExchangeCell>> send;  // [peer] cells it sends, in order
  std::vector<std::vector<ExchangeCell>> recv;  // [peer] cells it receives, in order
  int64_t elements_received = 0, elements_sent = 0;
  bool local_only = true;  // no rank sends anything (the same on every rank)
};

// Throws std::invalid_argument when an item lists no boxes or more than `world`, when a
// wanted cell is held by no rank, or when the boxes do not match the full shape's rank.
RankExchange plan_rank_exchange(const std::vector<ExchangeItem>& items, int rank, int world);

// The largest message of the exchange, per rank: out[r] = the most elements r sends to one
// peer or receives from one peer (cells of every item to or from that peer together). With
// periodic items only the ranks near the ends of the world and one period between them are
// computed, and the rest copied (the exchange is the same up to translation there).
std::vector<int64_t> largest_message_elements(const std::vector<ExchangeItem>& items, int world);

// The same, and how many messages each rank takes part in (sent plus received; one per peer
// and direction, every item's cells to or from that peer together).
struct ExchangeMessages {
  std::vector<int64_t> largest;  // elements
  std::vector<int> count;
};
ExchangeMessages exchange_messages(const std::vector<ExchangeItem>& items, int world);

}  // namespace shardgym
