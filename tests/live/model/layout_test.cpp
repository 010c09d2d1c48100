// Layout and exchange-plan arithmetic (no communication): every strategy's parameter boxes
// tile each tensor exactly, agree with the cost model's parameter count, and exchange plans
// receive exactly the elements a rank lacks.
#include <set>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/cost.h"
#include "runtime/live/tp/exchange.h"
#include "runtime/live/tp/layout.h"
#include "runtime/sim/collective_model.h"
#include "runtime/sim/layout.h"
#include "tests/env/test_specs.h"

namespace shardgym::live {
namespace {

ModelSpec model() {
  ModelSpec m;
  m.layers = 1;
  m.hidden = 16;
  m.heads = 8;
  m.ffn = 32;
  m.seq = 8;
  m.vocab = 32;
  m.global_batch = 16;
  return m;
}

// Elements of `box` not inside `have`, by brute force over the box.
int64_t lacking(const Box& want, const Box& have) {
  return want.numel() - want.intersect(have).numel();
}

TEST(Layout, ParameterBoxesTileEveryTensorForEveryStrategy) {
  const ModelSpec m = model();
  for (int world : {1, 2, 4, 8}) {
    StrategyCatalog cat(m, world);
    for (int block = 0; block < 2; ++block) {
      const BlockKind kind = ModelSpec::block_kind(block);
      for (int i = 0; i < cat.size(); ++i) {
        if (!cat.shape_mask(kind)[i]) continue;
        const Strategy& s = cat.at(i);
        std::vector<std::vector<ParamShard>> shards;
        for (int q = 0; q < world; ++q) shards.push_back(block_param_shards(m, block, place_block(s, q, world)));
        double rank_elems = 0;
        for (const auto& sh : shards[0]) rank_elems += sh.box.numel();
        EXPECT_DOUBLE_EQ(rank_elems, block_rank_params(m, kind, s)) << s.to_string();
        for (size_t k = 0; k < shards[0].size(); ++k) {
          std::vector<Box> distinct;
          for (int q = 0; q < world; ++q) {
            const Box& b = shards[q][k].box;
            if (std::find(distinct.begin(), distinct.end(), b) == distinct.end()) distinct.push_back(b);
          }
          int64_t covered = 0;
          for (size_t a = 0; a < distinct.size(); ++a) {
            covered += distinct[a].numel();
            for (size_t c = a + 1; c < distinct.size(); ++c)
              EXPECT_TRUE(distinct[a].intersect(distinct[c]).empty())
                  << s.to_string() << " " << shards[0][k].name << " boxes overlap";
          }
          EXPECT_EQ(covered, Box::whole(shards[0][k].full_shape).numel())
              << s.to_string() << " " << shards[0][k].name << " not covered";
        }
      }
    }
  }
}

TEST(Layout, ActivationBoxesCoverTheResidualStream) {
  const ModelSpec m = model();
  for (int world : {1, 2, 4, 8}) {
    StrategyCatalog cat(m, world);
    for (int i = 0; i < cat.size(); ++i) {
      const Strategy& s = cat.at(i);
      if (!cat.shape_mask(BlockKind::kAttention)[i]) continue;
      std::set<std::vector<int64_t>> distinct;
      int64_t covered = 0;
      for (int q = 0; q < world; ++q) {
        Box b = block_activation_box(m, place_block(s, q, world), m.global_batch);
        std::vector<int64_t> key = b.lo;
        key.insert(key.end(), b.hi.begin(), b.hi.end());
        if (distinct.insert(key).second) covered += b.numel();
      }
      EXPECT_EQ(covered, int64_t(m.global_batch) * m.seq * m.hidden) << s.to_string();
    }
  }
}

TEST(Layout, TwoDimensionalMeshMatchesCommGroups) {
  // tp2d(d1=2,d2=2,first=col) on 8 ranks: G1 = kMeshD1 (size d1), G2 = kMeshD2 (size d2).
  const Strategy s = Strategy::parse("tp2d(d1=2,d2=2,first=col)");
  for (int q = 0; q < 8; ++q) {
    const BlockPlacement p = place_block(s, q, 8);
    EXPECT_EQ(p.g1, comm_group(s, CommAxis::kMeshD1, q, 8));
    EXPECT_EQ(p.g2, comm_group(s, CommAxis::kMeshD2, q, 8));
    EXPECT_EQ(p.g1[p.i1], q);
    EXPECT_EQ(p.g2[p.i2], q);
    EXPECT_EQ(p.replica, q / 4);
  }
}

TEST(Exchange, TournamentPairsEveryTwoRanksOnce) {
  for (int world = 1; world <= 7; ++world) {
    std::set<std::pair<int, int>> met;
    for (const auto& round : tournament_rounds(world)) {
      for (int q = 0; q < world; ++q) {
        const int p = round[q];
        if (p < 0) continue;
        EXPECT_EQ(round[p], q);
        EXPECT_NE(p, q);
        if (q < p) {
          EXPECT_TRUE(met.insert({q, p}).second) << "pair met twice";
        }
      }
    }
    EXPECT_EQ(static_cast<int>(met.size()), world * (world - 1) / 2) << world;
  }
}

TEST(Exchange, ReceivesExactlyWhatEachRankLacks) {
  const ModelSpec m = model();
  const int world = 4;
  StrategyCatalog cat(m, world);
  std::vector<Strategy> valid;
  for (int i = 0; i < cat.size(); ++i)
    if (cat.shape_mask(BlockKind::kMlp)[i]) valid.push_back(cat.at(i));
  for (const Strategy& a : valid) {
    for (const Strategy& b : valid) {
      std::vector<ExchangeItem> items;
      for (size_t k = 0; k < 6; ++k) {
        ExchangeItem it;
        for (int q = 0; q < world; ++q) {
          it.have.push_back(block_param_shards(m, 1, place_block(a, q, world))[k].box);
          it.want.push_back(block_param_shards(m, 1, place_block(b, q, world))[k].box);
        }
        it.full_shape = it.have[0].hi;
        for (int d = 0; d < it.have[0].dims(); ++d)
          for (int q = 0; q < world; ++q) it.full_shape[d] = std::max(it.full_shape[d], it.have[q].hi[d]);
        items.push_back(it);
      }
      int64_t sent = 0, received = 0;
      for (int q = 0; q < world; ++q) {
        ExchangePlan plan(items, q, world);
        int64_t expect = 0;
        for (const auto& it : items) expect += lacking(it.want[q], it.have[q]);
        EXPECT_EQ(plan.elements_received(), expect) << a.to_string() << " -> " << b.to_string();
        sent += plan.elements_sent();
        received += plan.elements_received();
      }
      EXPECT_EQ(sent, received);
    }
  }
}

// The simulator and the live runtime place parameters with one geometry: for every pair of
// strategies of every block kind, the elements the simulator says a repartition moves
// (runtime/sim/layout.h) equal those the live exchange receives, rank by rank summed, exactly.
TEST(Layout, SimulatorRepartitionBytesEqualWhatTheLiveRanksLack) {
  ModelSpec m = model();
  m.global_batch = 32;
  for (int world : {2, 4, 8}) {
    const ClusterSpec cluster = test_specs::tiny_cluster(world, 1);
    const LinkState links = make_link_state(cluster, std::vector<double>(cluster.links.size(), 1.0));
    StrategyCatalog cat(m, world);
    for (int block = 0; block < 2; ++block) {
      const BlockKind kind = ModelSpec::block_kind(block);
      std::vector<Strategy> valid;
      for (int i = 0; i < cat.size(); ++i)
        if (cat.shape_mask(kind)[i]) valid.push_back(cat.at(i));
      ASSERT_GE(valid.size(), 3u) << world;
      int pairs = 0;
      for (const Strategy& a : valid) {
        for (const Strategy& b : valid) {
          int64_t lacking_elems = 0;
          for (int q = 0; q < world; ++q) {
            const auto have = block_param_shards(m, block, place_block(a, q, world));
            const auto want = block_param_shards(m, block, place_block(b, q, world));
            for (size_t k = 0; k < want.size(); ++k) lacking_elems += lacking(want[k].box, have[k].box);
          }
          const double sim = repartition_cost(m, kind, a, b, 1.0, cluster, links).bytes;
          EXPECT_EQ(sim, static_cast<double>(lacking_elems))
              << a.to_string() << " -> " << b.to_string() << " on " << world << " ranks, "
              << (kind == BlockKind::kAttention ? "attention" : "MLP");
          ++pairs;
        }
      }
      EXPECT_GT(pairs, 8);
    }
  }
}

}  // namespace
}  // namespace shardgym::live
