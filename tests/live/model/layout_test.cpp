// Layout and exchange-plan arithmetic (no communication): every strategy's parameter boxes
// tile each tensor exactly, agree with the cost model's parameter count, exchange plans
// receive exactly the elements a rank lacks, and the simulator's repartition and
// redistribution counts (runtime/sim/layout.h) equal the live exchange's, rank by rank.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/cost.h"
#include "runtime/live/tp/exchange.h"
#include "runtime/core/placement.h"
#include "runtime/sim/collective_model.h"
#include "runtime/sim/layout.h"
#include "tests/env/test_specs.h"

namespace shardgym::live {
namespace {

ModelSpec model() {
  ModelSpec m = ModelSpec::gpt(/*layers=*/1, /*hidden=*/16, /*heads=*/8, /*seq=*/8,
                               /*micro_batch=*/4, /*global_batch=*/16);
  m.ffn = 32;
  m.vocab = 32;
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

// The exchange plans of the live repartition of one block (runtime/live/tp/repartition.cpp:
// one item per parameter and per tensor kind: value, exp_avg, exp_avg_sq), and the elements
// each rank receives in them.
std::vector<int64_t> live_repartition_elements(const ModelSpec& m, int block, const Strategy& a,
                                               const Strategy& b, int world) {
  std::vector<std::vector<ParamShard>> old_shards(world), new_shards(world);
  for (int q = 0; q < world; ++q) {
    old_shards[q] = block_param_shards(m, block, place_block(a, q, world));
    new_shards[q] = block_param_shards(m, block, place_block(b, q, world));
  }
  std::vector<ExchangeItem> items;
  for (size_t i = 0; i < old_shards[0].size(); ++i) {
    ExchangeItem item;
    item.full_shape = old_shards[0][i].full_shape;
    for (int q = 0; q < world; ++q) {
      item.have.push_back(old_shards[q][i].box);
      item.want.push_back(new_shards[q][i].box);
    }
    for (int k = 0; k < 3; ++k) items.push_back(item);
  }
  std::vector<int64_t> out(world);
  for (int q = 0; q < world; ++q) out[q] = ExchangePlan(items, q, world).elements_received();
  return out;
}

// The live redistribution of the residual stream between two layouts (tp_model.cpp).
std::vector<int64_t> live_redistribution_elements(const std::vector<Box>& from,
                                                  const std::vector<Box>& to,
                                                  const std::vector<int64_t>& full_shape) {
  const int world = static_cast<int>(from.size());
  std::vector<int64_t> out(world);
  for (int q = 0; q < world; ++q)
    out[q] = ExchangePlan({ExchangeItem{full_shape, from, to}}, q, world).elements_received();
  return out;
}

std::vector<Box> activation_boxes(const ModelSpec& m, const Strategy& s, int world) {
  std::vector<Box> out;
  for (int q = 0; q < world; ++q)
    out.push_back(block_activation_box(m, place_block(s, q, world), m.global_batch));
  return out;
}

// The simulator and the live runtime place parameters with one geometry: for every pair of
// strategies of every block kind of the whole catalog (tp2d, sp, chunks, recompute included),
// the elements the simulator says each rank receives in a repartition equal those the live
// exchange plan receives on that rank, and the simulator's bytes equal the live run's.
TEST(Layout, SimulatorRepartitionEqualsTheLiveExchangeForEveryPairOfStrategies) {
  ModelSpec m = model();
  m.global_batch = 32;
  const double elem = sizeof(double);  // the live tests train in float64
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
      // Uneven tp1d shards (strategy.h heads=): two splits of every tp1d degree that the 8 heads
      // allow, one with sequence parallelism.
      for (int t = 2; t <= world && t <= m.heads; t *= 2)
        for (bool sp : {false, true}) {
          std::vector<int> heads(t, m.heads / t);
          heads[0] += 1, heads[t - 1] -= 1;
          if (sp) std::reverse(heads.begin(), heads.end());
          Strategy s = Strategy::tp1d(t, sp);
          s.set_heads(heads);
          if (s.uneven() && strategy_invalid_reason(s, m, kind, world).empty())
            valid.push_back(s);
        }
      int moving = 0;
      for (const Strategy& a : valid) {
        for (const Strategy& b : valid) {
          const std::string what = a.to_string() + " -> " + b.to_string() + " on " +
                                   std::to_string(world) + " ranks, " +
                                   (kind == BlockKind::kAttention ? "attention" : "MLP");
          const std::vector<int64_t> live = live_repartition_elements(m, block, a, b, world);
          std::vector<int64_t> sim = repartition_elements(m, kind, a, b, world);
          for (auto& e : sim) e *= 3;  // value, exp_avg, exp_avg_sq
          EXPECT_EQ(sim, live) << what;
          const int64_t total = std::accumulate(live.begin(), live.end(), int64_t(0));
          EXPECT_EQ(repartition_cost(m, kind, a, b, elem, cluster, links).bytes * 3,
                    double(total) * elem)
              << what;
          moving += total > 0;
        }
      }
      EXPECT_GT(moving, 8);
    }
  }
}

// Random pairs of whole plans (seeded; every block's strategy drawn from the catalog's valid
// entries, tp2d included): the simulator's repartition bytes of the plan change equal the
// bytes the live ranks receive, rank by rank and in total, exactly; and along each plan the
// activation redistributions between consecutive layouts (embedding and head data parallel)
// equal the live ones.
TEST(Layout, SimulatorBytesEqualTheLiveExchangeForRandomPlanPairs) {
  ModelSpec m = model();
  m.layers = 3;
  m.global_batch = 32;
  const double elem = sizeof(double);
  std::mt19937 rng(20261124);
  const std::vector<int64_t> act_shape = {m.global_batch, m.seq, m.hidden};
  int pairs = 0, with_2d = 0;
  for (int world : {2, 4, 8, 16}) {
    const ClusterSpec cluster = test_specs::tiny_cluster(world, 1);
    const LinkState links = make_link_state(cluster, std::vector<double>(cluster.links.size(), 1.0));
    StrategyCatalog cat(m, world);
    std::vector<Strategy> valid[2];
    for (int i = 0; i < cat.size(); ++i)
      for (int k = 0; k < 2; ++k)
        if (cat.shape_mask(ModelSpec::block_kind(k))[i]) valid[k].push_back(cat.at(i));
    auto random_plan = [&] {
      Plan p;
      for (int b = 0; b < m.num_blocks(); ++b) {
        const auto& v = valid[b % 2];
        p.blocks.push_back(v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]);
      }
      EXPECT_EQ(p.validate(m, world), "") << p.to_string();
      return p;
    };
    std::vector<Box> dp_boxes;
    for (int q = 0; q < world; ++q)
      dp_boxes.push_back(data_parallel_activation_box(m, q, world, m.global_batch));
    ASSERT_EQ(dp_boxes, activation_boxes(m, Strategy::dp(), world));
    for (int n = 0; n < 40; ++n) {
      const Plan a = random_plan(), b = random_plan();
      const std::string what = a.to_string() + " -> " + b.to_string() + " on " +
                               std::to_string(world) + " ranks";
      std::vector<int64_t> live(world, 0), sim(world, 0);
      double sim_bytes = 0;
      for (int blk = 0; blk < m.num_blocks(); ++blk) {
        const BlockKind kind = ModelSpec::block_kind(blk);
        with_2d += a.blocks[blk].kind == StrategyKind::kTP2D;
        if (a.blocks[blk] == b.blocks[blk]) continue;  // repartition.cpp moves changed blocks only
        const auto l = live_repartition_elements(m, blk, a.blocks[blk], b.blocks[blk], world);
        const auto s = repartition_elements(m, kind, a.blocks[blk], b.blocks[blk], world);
        for (int q = 0; q < world; ++q) live[q] += l[q], sim[q] += 3 * s[q];
        sim_bytes += repartition_cost(m, kind, a.blocks[blk], b.blocks[blk], 3 * elem, cluster,
                                      links).bytes;
      }
      EXPECT_EQ(sim, live) << what;
      EXPECT_EQ(sim_bytes, double(std::accumulate(live.begin(), live.end(), int64_t(0))) * elem)
          << what;
      // Activations along plan a: dp → block 0 → ... → last block → dp.
      std::vector<Strategy> chain = {Strategy::dp()};
      chain.insert(chain.end(), a.blocks.begin(), a.blocks.end());
      chain.push_back(Strategy::dp());
      for (size_t k = 0; k + 1 < chain.size(); ++k) {
        const auto l = live_redistribution_elements(activation_boxes(m, chain[k], world),
                                                    activation_boxes(m, chain[k + 1], world),
                                                    act_shape);
        EXPECT_EQ(redistribution_elements(m, chain[k], chain[k + 1], world), l)
            << chain[k].to_string() << " -> " << chain[k + 1].to_string();
        EXPECT_EQ(redistribution_cost(m, chain[k], chain[k + 1], cluster, links).bytes,
                  double(std::accumulate(l.begin(), l.end(), int64_t(0))) * dtype_bytes(m.dtype))
            << chain[k].to_string() << " -> " << chain[k + 1].to_string();
      }
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 160);
  EXPECT_GT(with_2d, 40);  // tp2d blocks are drawn
}

}  // namespace
}  // namespace shardgym::live
