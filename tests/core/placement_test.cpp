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
  ModelSpec m = ModelSpec::gpt(/*layers=*/1, /*hidden=*/48, /*heads=*/12, /*seq=*/12,
                               /*micro_batch=*/4, /*global_batch=*/24);
  m.ffn = 96;
  m.vocab = 32;
  return m;
}

// The same shapes with Llama's blocks (model_spec.h): RMSNorm, no biases, SwiGLU of its own
// width, 4 query groups of 3 heads (grouped-query attention).
ModelSpec llama_model() {
  ModelSpec m = model();
  m.set_llama_traits();
  m.kv_heads = 4;
  m.ffn = 72;
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
  for (const ModelSpec& m : {model(), llama_model()})
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
  for (const ModelSpec& m : {model(), llama_model()})
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

// Uneven tp1d shards (strategy.h heads=): within a tensor group the ranks' boxes of every
// split parameter are disjoint and cover it whole, rank i holds exactly its heads' columns
// (QKV, fc1) and rows (projection, fc2), the cost model's closed form counts each position's
// elements, and rank_param_elements is the fullest rank's.
TEST(Placement, UnevenHeadsPartitionEveryTensorByHead) {
  const ModelSpec m = model();  // 12 heads of width 4, ffn 96: 8 columns per head
  std::mt19937 rng(3);
  for (int t : {2, 3, 4, 6}) {
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<int> heads(t, 1);
      for (int k = t; k < m.heads; ++k) ++heads[rng() % t];
      Strategy s = Strategy::tp1d(t, trial % 2 == 1);
      s.set_heads(heads);
      if (!s.uneven()) continue;
      ASSERT_EQ(Strategy::parse(s.to_string()), s) << s.to_string();
      for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
        ASSERT_EQ(strategy_invalid_reason(s, m, kind, t), "") << s.to_string();
        std::vector<std::vector<Box>> boxes;
        double fullest = 0;
        for (int q = 0; q < t; ++q) {
          const BlockPlacement p = place_block(s, q, t);
          boxes.push_back(block_param_boxes(m, kind, p));
          const double n = double(block_param_elements(m, kind, p));
          EXPECT_DOUBLE_EQ(n, block_rank_params(m, kind, s, q)) << s.to_string() << " rank " << q;
          fullest = std::max(fullest, n);
          const int64_t cols = kind == BlockKind::kAttention ? 3 * 4 * heads[q] : 8 * heads[q];
          EXPECT_EQ(boxes[q][2].extent(1), cols) << s.to_string() << " rank " << q;
        }
        EXPECT_DOUBLE_EQ(rank_param_elements(m, kind, s), fullest);
        EXPECT_DOUBLE_EQ(block_rank_params(m, kind, s), fullest);
        const int64_t h = m.hidden, f = m.ffn_size();
        const std::vector<std::vector<int64_t>> shapes =
            kind == BlockKind::kAttention
                ? std::vector<std::vector<int64_t>>{{h}, {h}, {h, 3 * h}, {3 * h}, {h, h}, {h}}
                : std::vector<std::vector<int64_t>>{{h}, {h}, {h, f}, {f}, {f, h}, {h}};
        for (size_t k = 0; k < shapes.size(); ++k) {
          const Box whole = Box::whole(shapes[k]);
          const bool replicated = k < 2 || k == 5;
          int64_t covered = 0;
          for (int q = 0; q < t; ++q) {
            EXPECT_TRUE(whole.contains(boxes[q][k]));
            if (replicated) {
              EXPECT_EQ(boxes[q][k], whole);
            }
            covered += boxes[q][k].numel();
            for (int r = q + 1; r < t && !replicated; ++r)
              EXPECT_EQ(boxes[q][k].overlap(boxes[r][k]), 0) << s.to_string() << " param " << k;
          }
          EXPECT_EQ(covered, replicated ? t * whole.numel() : whole.numel())
              << s.to_string() << " param " << k;
        }
      }
    }
  }
}

// Grouped-query attention: an uneven split is one of whole query groups (3 heads each here);
// a rank's QKV columns are its groups' (3 query heads, K and V: 5 head widths per group), its
// fc1 columns its heads' share of SwiGLU's gate and up, and the boxes still tile each tensor.
TEST(Placement, UnevenSplitsOfAGroupedQueryModelAreWholeGroups) {
  const ModelSpec m = llama_model();  // 12 heads of width 4 in 4 groups, ffn 72 (SwiGLU)
  Strategy s = Strategy::parse("tp1d(t=2,heads=9/3)");
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    ASSERT_EQ(strategy_invalid_reason(s, m, kind, 2), "");
    const auto b0 = block_param_boxes(m, kind, place_block(s, 0, 2));
    const auto b1 = block_param_boxes(m, kind, place_block(s, 1, 2));
    ASSERT_EQ(b0.size(), 3u);  // norm weight, in-GEMM, out-GEMM: no biases, no norm bias
    const int64_t cols0 = kind == BlockKind::kAttention ? 3 * 5 * 4 : 2 * 6 * 9;
    EXPECT_EQ(b0[1].extent(1), cols0);
    EXPECT_EQ(b0[1].extent(1) + b1[1].extent(1),
              kind == BlockKind::kAttention ? m.qkv_width() : m.fc1_width());
    EXPECT_EQ(b0[2].extent(0), kind == BlockKind::kAttention ? 4 * 9 : 6 * 9);
    EXPECT_DOUBLE_EQ(double(block_param_elements(m, kind, place_block(s, 0, 2)) +
                            block_param_elements(m, kind, place_block(s, 1, 2))) -
                         m.hidden,  // the norm weight is on both ranks
                     double(kind == BlockKind::kAttention ? m.attention_params() : m.mlp_params()));
  }
  // 8/4 splits a group of three: refused with the reason, and the catalog offers no such split.
  s = Strategy::parse("tp1d(t=2,heads=8/4)");
  EXPECT_NE(strategy_invalid_reason(s, m, BlockKind::kAttention, 2).find("query groups"),
            std::string::npos);
  StrategyCatalog cat(m, 4);
  for (int i = 0; i < cat.size(); ++i)
    for (int c : cat.at(i).heads()) EXPECT_EQ(c % 3, 0) << cat.at(i).to_string();
  // An even split must divide the 4 groups too: tp1d(t=6) divides 12 heads, not 4 groups.
  EXPECT_NE(strategy_invalid_reason(Strategy::tp1d(6), m, BlockKind::kAttention, 12)
                .find("does not divide kv_heads=4"),
            std::string::npos);
  EXPECT_EQ(strategy_invalid_reason(Strategy::tp1d(6), m, BlockKind::kMlp, 12), "");
}

TEST(Placement, UnevenHeadsThatDoNotFitTheModelAreRefusedWithTheReason) {
  const ModelSpec m = model();
  Strategy s = Strategy::parse("tp1d(t=2,heads=7/6)");  // 13 heads, the model has 12
  EXPECT_NE(strategy_invalid_reason(s, m, BlockKind::kAttention, 2).find("sums to 13"),
            std::string::npos);
  EXPECT_THROW(block_param_boxes(m, BlockKind::kMlp, place_block(s, 0, 2)), std::invalid_argument);
  ModelSpec odd = m;
  odd.ffn = 100;  // not a multiple of 12 heads: the MLP has no per-head column split
  s = Strategy::parse("tp1d(t=2,heads=7/5)");
  EXPECT_NE(strategy_invalid_reason(s, odd, BlockKind::kMlp, 2).find("does not split by heads"),
            std::string::npos);
  EXPECT_THROW(Strategy::parse("tp1d(t=2,heads=6/6)"), std::invalid_argument);  // even: no heads=
  EXPECT_THROW(Strategy::parse("tp1d(t=3,heads=6/6)"), std::invalid_argument);  // 2 counts, t=3
  EXPECT_THROW(Strategy::parse("tp1d(t=2,heads=12/0)"), std::invalid_argument);
  EXPECT_THROW(Strategy::parse("tp2d(d1=2,d2=2,first=row,heads=1/2/3/6)"), std::invalid_argument);
  EXPECT_THROW(Strategy::parse("tp1d(t=2,heads=5/)"), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
