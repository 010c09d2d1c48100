// The exchange geometry (runtime/core/exchange_geometry.h): the periodic listing of parameter
// boxes that the simulator uses gives the messages of the full listing the live runtime uses,
// and largest_message_elements agrees with every rank's own plan.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "runtime/core/exchange_geometry.h"

namespace shardgym {
namespace {

ModelSpec model() {
  ModelSpec m = ModelSpec::gpt(/*layers=*/2, /*hidden=*/48, /*heads=*/12, /*seq=*/16,
                               /*micro_batch=*/1, /*global_batch=*/48);
  m.name = "gpt-test";
  m.vocab = 256;
  return m;
}

// Strategies of every kind whose degree divides the world and whose weights split evenly.
std::vector<Strategy> strategies(int world) {
  std::vector<Strategy> out = {Strategy::dp()};
  for (int t : {2, 3, 4, 6, 8, 12}) {
    if (world % t) continue;
    out.push_back(Strategy::tp1d(t));
    for (int d1 : {2, 3, 4, 6})
      if (t % d1 == 0 && t / d1 > 1) {
        out.push_back(Strategy::tp2d(d1, t / d1, true));
        out.push_back(Strategy::tp2d(d1, t / d1, false));
      }
  }
  std::vector<Strategy> fit;
  for (const Strategy& s : out) {
    try {
      for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp})
        block_param_boxes(model(), kind, place_block(s, 0, world));
      fit.push_back(s);
    } catch (const std::invalid_argument&) {
    }
  }
  return fit;
}

// One item per parameter of the block; `period` boxes per layout (0: one per rank).
std::vector<ExchangeItem> items(const ModelSpec& m, BlockKind kind, const Strategy& a,
                                const Strategy& b, int world, bool periodic) {
  const int na = periodic ? a.degree() : world, nb = periodic ? b.degree() : world;
  std::vector<std::vector<Box>> have, want;
  for (int q = 0; q < std::max(na, nb); ++q) {
    const auto ha = block_param_boxes(m, kind, place_block(a, q % world, world));
    const auto hb = block_param_boxes(m, kind, place_block(b, q % world, world));
    have.resize(ha.size());
    want.resize(ha.size());
    for (size_t k = 0; k < ha.size(); ++k) {
      if (q < na) have[k].push_back(ha[k]);
      if (q < nb) want[k].push_back(hb[k]);
    }
  }
  std::vector<ExchangeItem> out;
  for (size_t k = 0; k < have.size(); ++k)
    out.push_back(ExchangeItem::covering(have[k], want[k]));
  return out;
}

// Largest message of rank r from its own plan: the most elements to or from one peer.
int64_t from_rank_plan(const std::vector<ExchangeItem>& its, int r, int world) {
  const RankExchange x = plan_rank_exchange(its, r, world);
  int64_t m = 0;
  for (int q = 0; q < world; ++q) {
    int64_t s = 0, v = 0;
    for (const auto& c : x.send[q]) s += c.box.numel();
    for (const auto& c : x.recv[q]) v += c.box.numel();
    m = std::max({m, s, v});
  }
  return m;
}

TEST(ExchangeGeometry, PeriodicListingGivesTheMessagesOfTheFullOne) {
  const ModelSpec m = model();
  std::mt19937 rng(5);
  int compared = 0, nonzero = 0;
  // 48 and 96 ranks are past the point where only the ends and one period are computed
  // (2·(2·reach + period + reach) < world for the small degrees).
  for (int world : {4, 6, 12, 48, 96}) {
    const auto all = strategies(world);
    for (int trial = 0; trial < 12; ++trial) {
      const Strategy a = all[rng() % all.size()], b = all[rng() % all.size()];
      for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
        const auto full = items(m, kind, a, b, world, false);
        const auto periodic = items(m, kind, a, b, world, true);
        const auto want = largest_message_elements(full, world);
        EXPECT_EQ(largest_message_elements(periodic, world), want)
            << a.to_string() << " -> " << b.to_string() << " on " << world;
        for (int r : {0, world / 2, world - 1})
          EXPECT_EQ(want[r], from_rank_plan(full, r, world))
              << a.to_string() << " -> " << b.to_string() << ", rank " << r << " of " << world;
        ++compared;
        nonzero += *std::max_element(want.begin(), want.end()) > 0;
      }
    }
  }
  EXPECT_GT(nonzero, compared / 2);  // the pairs drawn do move data
}

TEST(ExchangeGeometry, NearestHolderTiesGoToTheLowerRank) {
  // Rank 1 wants [0, 4); ranks 0 and 2 both hold it: rank 0 sends.
  ExchangeItem it;
  it.full_shape = {4};
  it.have = {Box{{0}, {4}}, Box{{0}, {0}}, Box{{0}, {4}}};
  it.want = {Box{{0}, {4}}, Box{{0}, {4}}, Box{{0}, {4}}};
  const RankExchange x = plan_rank_exchange({it}, 1, 3);
  ASSERT_EQ(x.recv[0].size(), 1u);
  EXPECT_TRUE(x.recv[2].empty());
  EXPECT_EQ(x.elements_received, 4);
  EXPECT_EQ(largest_message_elements({it}, 3), (std::vector<int64_t>{4, 4, 0}));
}

// Messages per rank, sent plus received, one per peer and direction (the repartition's
// per-message term, runtime/sim/layout.h): 4 shards to full copies is every rank gathering
// from the 3 others and serving them (6); 4 shards to halves is one exchange with one peer (2);
// with a second item the counts stay per peer. Agrees with each rank's own plan.
TEST(ExchangeGeometry, CountsMessagesPerRank) {
  auto item = [](std::vector<Box> have, std::vector<Box> want) {
    return ExchangeItem::covering(std::move(have), std::move(want));
  };
  const std::vector<Box> shards = {Box{{0}, {2}}, Box{{2}, {4}}, Box{{4}, {6}}, Box{{6}, {8}}};
  const ExchangeItem to_full = item(shards, {Box{{0}, {8}}});
  const ExchangeItem to_halves = item(shards, {Box{{0}, {4}}, Box{{0}, {4}}, Box{{4}, {8}},
                                               Box{{4}, {8}}});
  EXPECT_EQ(exchange_messages({to_full}, 4).count, (std::vector<int>{6, 6, 6, 6}));
  EXPECT_EQ(exchange_messages({to_halves}, 4).count, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(exchange_messages({to_halves, to_halves}, 4).count, (std::vector<int>{2, 2, 2, 2}));
  for (const ExchangeItem& it : {to_full, to_halves}) {
    const ExchangeMessages m = exchange_messages({it}, 4);
    for (int r = 0; r < 4; ++r) {
      const RankExchange x = plan_rank_exchange({it}, r, 4);
      int n = 0;
      for (int q = 0; q < 4; ++q) n += !x.send[q].empty() + !x.recv[q].empty();
      EXPECT_EQ(m.count[r], n) << "rank " << r;
    }
  }
}

TEST(ExchangeGeometry, RefusesWhatNoRankHoldsAndMalformedItems) {
  ExchangeItem it;
  it.full_shape = {4};
  it.have = {Box{{0}, {2}}, Box{{0}, {2}}};
  it.want = {Box{{0}, {4}}, Box{{0}, {4}}};
  EXPECT_THROW(plan_rank_exchange({it}, 0, 2), std::invalid_argument);
  EXPECT_THROW(largest_message_elements({it}, 2), std::invalid_argument);
  ExchangeItem empty;
  empty.full_shape = {4};
  EXPECT_THROW(largest_message_elements({empty}, 2), std::invalid_argument);
  EXPECT_THROW(plan_rank_exchange({it}, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
