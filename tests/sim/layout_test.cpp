// runtime/sim/layout.h against runtime/core/placement.h: the layout keys the simulator caches
// by say "same placement" exactly when every rank's boxes are the same, and the byte counts
// are the geometry's element counts times the bytes per element.
#include "runtime/sim/layout.h"

#include <numeric>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/placement.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

ModelSpec model() {
  ModelSpec m = testing::gpt(1, 64, 8, 16, 1);
  m.ffn = 128;
  m.global_batch = 16;
  return m;
}

std::vector<std::vector<Box>> param_boxes(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                          int world) {
  std::vector<std::vector<Box>> out;
  for (int q = 0; q < world; ++q)
    out.push_back(block_param_boxes(m, kind, place_block(s, q, world)));
  return out;
}

std::vector<Box> activation_boxes(const ModelSpec& m, const Strategy& s, int world) {
  std::vector<Box> out;
  for (int q = 0; q < world; ++q)
    out.push_back(
        block_activation_box(m, place_block(s, q, world), effective_global_batch(m, world)));
  return out;
}

TEST(SimLayout, LayoutKeysAreEqualExactlyWhenEveryRanksBoxesAre) {
  const ModelSpec m = model();
  for (int world : {2, 4, 8}) {
    StrategyCatalog cat(m, world);
    for (int i = 0; i < cat.size(); ++i) {
      for (int j = 0; j < cat.size(); ++j) {
        const Strategy &a = cat.at(i), &b = cat.at(j);
        const std::string what = a.to_string() + " vs " + b.to_string();
        for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
          if (!cat.shape_mask(kind)[i] || !cat.shape_mask(kind)[j]) continue;
          EXPECT_EQ(param_layout_key(a) == param_layout_key(b),
                    param_boxes(m, kind, a, world) == param_boxes(m, kind, b, world))
              << what;
        }
        if (cat.shape_mask(BlockKind::kMlp)[i] && cat.shape_mask(BlockKind::kMlp)[j]) {
          EXPECT_EQ(activation_layout_key(a) == activation_layout_key(b),
                    activation_boxes(m, a, world) == activation_boxes(m, b, world))
              << what;
        }
      }
    }
  }
}

TEST(SimLayout, BytesAreTheGeometrysElementsTimesBytesPerElement) {
  const ModelSpec m = model();
  const int world = 8;
  const ClusterSpec c = testing::cluster(2, 4, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  StrategyCatalog cat(m, world);
  const double per_param = 14;
  int moving = 0;
  for (int i = 0; i < cat.size(); ++i) {
    for (int j = 0; j < cat.size(); ++j) {
      const Strategy &a = cat.at(i), &b = cat.at(j);
      for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
        if (!cat.shape_mask(kind)[i] || !cat.shape_mask(kind)[j]) continue;
        const std::vector<int64_t> per_rank = repartition_elements(m, kind, a, b, world);
        const int64_t total = std::accumulate(per_rank.begin(), per_rank.end(), int64_t(0));
        const TransferCost t = repartition_cost(m, kind, a, b, per_param, c, links);
        EXPECT_EQ(t.bytes, double(total) * per_param) << a.to_string() << " -> " << b.to_string();
        EXPECT_EQ(t.max_rank_bytes,
                  double(*std::max_element(per_rank.begin(), per_rank.end())) * per_param);
        EXPECT_EQ(t.time_s > 0, total > 0);
        moving += total > 0;
      }
      if (!cat.shape_mask(BlockKind::kMlp)[i] || !cat.shape_mask(BlockKind::kMlp)[j]) continue;
      const std::vector<int64_t> act = redistribution_elements(m, a, b, world);
      const TransferCost r = redistribution_cost(m, a, b, c, links);
      EXPECT_EQ(r.bytes,
                double(std::accumulate(act.begin(), act.end(), int64_t(0))) * dtype_bytes(m.dtype));
    }
  }
  EXPECT_GT(moving, 20);
}

// A pipeline stage's micro-batch can hold fewer sequences than a layout has replicas: dp on 4
// ranks with 2 sequences holds half a sequence per rank. The boxes need whole rows, so the
// simulator counts a batch that splits and scales; the result is linear in the batch.
TEST(SimLayout, ABatchSmallerThanTheReplicasIsPricedByScaling) {
  ModelSpec m = model();
  const ClusterSpec c = testing::cluster(1, 4, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  const double seq_bytes = double(m.seq) * m.hidden * dtype_bytes(m.dtype);
  for (int G : {2, 4, 8}) {
    m.global_batch = G;
    // Under tp1d(2) a replica (2 ranks) holds G/2 sequences; under dp a rank holds G/4 of them.
    const double expect = 4 * (G / 2.0 - G / 4.0) * seq_bytes;
    EXPECT_EQ(redistribution_cost(m, Strategy::dp(), Strategy::tp1d(2), c, links).bytes, expect)
        << G;
    EXPECT_EQ(redistribution_cost(m, Strategy::tp1d(2), Strategy::dp(), c, links).bytes, 0) << G;
  }
  // A strategy whose degree does not divide the world has no placement there: nothing moves.
  EXPECT_EQ(redistribution_cost(m, Strategy::tp1d(8), Strategy::dp(), c, links).bytes, 0);
  EXPECT_EQ(
      repartition_cost(m, BlockKind::kMlp, Strategy::tp1d(8), Strategy::dp(), 14, c, links).bytes,
      0);
}

}  // namespace
}  // namespace shardgym
