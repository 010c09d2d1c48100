// runtime/core/placement.h: box arithmetic, the mod-t symmetry the simulator relies on, and
// the per-rank parameter (state) elements against the cost model's closed form.
#include "runtime/core/placement.h"

#include <random>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/cost.h"

namespace shardgym {
namespace {

ModelSpec model() {
  ModelSpec m;
  m.layers = 1;
  m.hidden = 48;
  m.heads = 12;
  m.ffn = 96;
  m.seq = 12;
  m.vocab = 32;
  m.global_batch = 24;
  return m;
}

// Elements of `a ∩ b` counted one index at a time.
int64_t brute_overlap(const Box& a, const Box& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 8; ++j)
      n += a.lo[0] <= i && i < a.hi[0] && a.lo[1] <= j && j < a.hi[1] && b.lo[0] <= i &&
           i < b.hi[0] && b.lo[1] <= j && j < b.hi[1];
  return n;
}

TEST(Placement, OverlapCountsTheIntersection) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> coord(0, 8);
  auto random_box = [&] {
    Box b{{coord(rng), coord(rng)}, {0, 0}};
    b.hi = {std::max(b.lo[0], coord(rng)), std::max(b.lo[1], coord(rng))};
    return b;
  };
  for (int i = 0; i < 2000; ++i) {
    const Box a = random_box(), b = random_box(), c = random_box();
    EXPECT_EQ(a.overlap(b), brute_overlap(a, b)) << a.to_string() << " " << b.to_string();
    EXPECT_EQ(a.overlap(b), a.intersect(b).numel());
    EXPECT_EQ(a.overlap(b, c), a.intersect(b).intersect(c).numel());
  }
}

// Every parameter box depends on rank mod t only; activation boxes of ranks at the same mesh
// position differ only in their batch rows (the replica's slice).
TEST(Placement, BoxesDependOnTheMeshPositionOnly) {
  const ModelSpec m = model();
  for (int world : {4, 8, 12}) {
    StrategyCatalog cat(m, world);
    for (int i = 0; i < cat.size(); ++i) {
      const Strategy& s = cat.at(i);
      const int t = s.degree();
      for (int block = 0; block < 2; ++block) {
        const BlockKind kind = ModelSpec::block_kind(block);
        if (!cat.shape_mask(kind)[i]) continue;
        for (int q = 0; q < world; ++q) {
          const BlockPlacement full = place_block(s, q, world);
          const BlockPlacement mesh = place_block_mesh(s, q, world);
          const BlockPlacement pos = place_block_mesh(s, q % t, world);
          EXPECT_EQ(full.replicas, static_cast<int>(full.data.size()));
          EXPECT_TRUE(mesh.data.empty());
          EXPECT_EQ(block_param_boxes(m, kind, full), block_param_boxes(m, kind, pos))
              << s.to_string() << " rank " << q;
          Box act = block_activation_box(m, full, m.global_batch);
          Box act0 = block_activation_box(m, pos, m.global_batch);
          const int64_t rows = m.global_batch / (world / t);
          EXPECT_EQ(act.lo[0], q / t * rows);
          act.lo[0] = act0.lo[0], act.hi[0] = act0.hi[0];
          EXPECT_EQ(act, act0) << s.to_string() << " rank " << q;
        }
      }
    }
  }
}

// A rank's parameter (and so optimizer-state) elements from its boxes equal the cost model's
// closed form block_rank_params, on every rank, for every strategy of the catalog.
TEST(Placement, ParamElementsPerRankEqualTheCostModel) {
  const ModelSpec m = model();
  for (int world : {1, 2, 4, 8, 12}) {
    StrategyCatalog cat(m, world);
    for (int i = 0; i < cat.size(); ++i) {
      for (int block = 0; block < 2; ++block) {
        const BlockKind kind = ModelSpec::block_kind(block);
        if (!cat.shape_mask(kind)[i]) continue;
        for (int q = 0; q < world; ++q)
          EXPECT_EQ(double(block_param_elements(m, kind, place_block_mesh(cat.at(i), q, world))),
                    block_rank_params(m, kind, cat.at(i)))
              << cat.at(i).to_string() << " rank " << q << " of " << world;
        EXPECT_EQ(rank_param_elements(m, kind, cat.at(i)), block_rank_params(m, kind, cat.at(i)));
      }
    }
  }
}

TEST(Placement, RankParamElementsOfAStrategyWithoutBoxesIsTheClosedForm) {
  const ModelSpec m = model();  // heads = 12: tp1d(8) has no attention boxes
  EXPECT_DOUBLE_EQ(rank_param_elements(m, BlockKind::kAttention, Strategy::tp1d(8)),
                   block_rank_params(m, BlockKind::kAttention, Strategy::tp1d(8)));
  // With boxes: dp holds the whole block: 2h (LayerNorm) + 3h² + 3h + h² + h.
  const double h = m.hidden;
  EXPECT_DOUBLE_EQ(rank_param_elements(m, BlockKind::kAttention, Strategy::dp()),
                   2 * h + 3 * h * h + 3 * h + h * h + h);
}

TEST(Placement, RejectsWhatDoesNotSplit) {
  const ModelSpec m = model();
  EXPECT_THROW(place_block(Strategy::tp1d(3), 0, 8), std::invalid_argument);
  EXPECT_THROW(place_block(Strategy::tp1d(2), 4, 4), std::invalid_argument);
  // heads = 12 does not split over 8 ranks: the attention boxes refuse, naming the strategy.
  try {
    block_param_boxes(m, BlockKind::kAttention, place_block(Strategy::tp1d(8), 0, 8));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tp1d"), std::string::npos) << e.what();
  }
  // A global batch of 24 does not split over 16 replicas.
  EXPECT_THROW(block_activation_box(m, place_block(Strategy::dp(), 0, 16), 24),
               std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
