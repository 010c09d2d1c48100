// Closed-form checks of runtime/core/cost.h against the papers' formulas (docs/design.md §3–§4).
// Tolerances: the quantities are sums of a few doubles of moderate size, so 1e-9 relative
// leaves room only for rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runtime/core/cost.h"

namespace shardgym {
namespace {

constexpr double kRel = 1e-9;

ModelSpec gpt() {
  return ModelSpec::gpt(/*layers=*/2, /*hidden=*/1024, /*heads=*/16, /*seq=*/512,
                        /*micro_batch=*/2);
}

double layer_volume(const ModelSpec& m, const Strategy& s, int world) {
  return block_comm_elements_per_rank(m, BlockKind::kAttention, s, world) +
         block_comm_elements_per_rank(m, BlockKind::kMlp, s, world);
}

TEST(Cost, Megatron1dMovesEightBshPerLayer) {
  const ModelSpec m = gpt();
  for (int world : {8, 16}) {
    for (int t : {2, 4, 8}) {
      for (bool sp : {false, true}) {
        const Strategy s = Strategy::tp1d(t, sp);
        const double b = local_batch(m, s, world);
        const double expected = 8 * b * m.seq * m.hidden * (t - 1.0) / t;
        EXPECT_NEAR(layer_volume(m, s, world), expected, kRel * expected) << s.to_string();
      }
    }
  }
}

TEST(Cost, ChunkingKeepsTheVolume) {
  const ModelSpec m = gpt();
  Strategy s = Strategy::tp1d(4);
  const double v = layer_volume(m, s, 8);
  s.chunks = 2;
  EXPECT_NEAR(layer_volume(m, s, 8), v, kRel * v);
  EXPECT_EQ(block_collectives(m, BlockKind::kMlp, s, 8).size(), 4u);  // 2 ops × 2 chunks
}

TEST(Cost, Atp2dWithD2OneIsMegatron1d) {
  const ModelSpec m = gpt();
  for (int t : {2, 4, 8}) {
    for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
      const auto mega = block_collectives(m, kind, Strategy::tp1d(t), 8);
      const auto atp = block_collectives(m, kind, Strategy::tp2d(t, 1, true), 8);
      ASSERT_EQ(mega.size(), atp.size());
      double vm = 0, va = 0;
      for (size_t i = 0; i < mega.size(); ++i) {
        vm += mega[i].elements_sent_per_rank();
        va += atp[i].elements_sent_per_rank();
        EXPECT_EQ(atp[i].op, CollOp::kAllReduce);
        EXPECT_EQ(atp[i].group_size, t);
      }
      EXPECT_NEAR(va, vm, kRel * vm);
      // Same ranks too: the d1 axis of a d2 = 1 mesh is the tp group.
      for (int r = 0; r < 8; ++r)
        EXPECT_EQ(comm_group(Strategy::tp2d(t, 1, true), CommAxis::kMeshD1, r, 8),
                  comm_group(Strategy::tp1d(t), CommAxis::kTensor, r, 8));
    }
  }
}

TEST(Cost, Atp2dPerAxisVolumesFollowTheDesign) {
  const ModelSpec m = gpt();
  const int d1 = 2, d2 = 4, world = 8;
  const Strategy s = Strategy::tp2d(d1, d2, true);
  const double n = double(local_batch(m, s, world)) * m.seq, h = m.hidden, f = m.ffn_size();
  // X per (axis, op, direction), GEMM collectives only (LN statistics are 2N and listed apart).
  std::map<std::string, double> x;
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp})
    for (const auto& c : block_collectives(m, kind, s, world))
      if (std::string(c.what).rfind("ln", 0) != 0) x[c.what] = c.elements;
  EXPECT_DOUBLE_EQ(x["mlp.fc1 ar(d2)"], n * f / d1);        // fwd all-reduce over d2 [N,4h/d1]
  EXPECT_DOUBLE_EQ(x["mlp.fc1 ar(d1) bwd"], n * h / d2);    // bwd all-reduce over d1 [N,h/d2]
  EXPECT_DOUBLE_EQ(x["mlp.fc2 ar(d1)"], n * h / d2);        // fwd all-reduce over d1 [N,h/d2]
  EXPECT_DOUBLE_EQ(x["mlp.fc2 ar(d2) bwd"], n * f / d1);    // bwd all-reduce over d2 [N,4h/d1]
  EXPECT_DOUBLE_EQ(x["attn.qkv rs(d2)"], n * 3 * h / d1);   // fwd reduce-scatter over d2
  EXPECT_DOUBLE_EQ(x["attn.out ag(d2)"], n * h / d1);       // all-gather of [N,h/(d1·d2)]
  EXPECT_DOUBLE_EQ(x["attn.out ar(d1)"], n * h / d2);
  EXPECT_EQ(x.size(), 10u);
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp})
    for (const auto& c : block_collectives(m, kind, s, world))
      EXPECT_EQ(c.group_size, c.axis == CommAxis::kMeshD1 ? d1 : d2) << c.what;
}

TEST(Cost, MeshAxesSwapPlacementWithFirst) {
  const Strategy row = Strategy::tp2d(2, 4, true), col = Strategy::tp2d(2, 4, false);
  EXPECT_EQ(comm_group(row, CommAxis::kMeshD2, 5, 16), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(comm_group(row, CommAxis::kMeshD1, 5, 16), (std::vector<int>{1, 5}));
  EXPECT_EQ(comm_group(col, CommAxis::kMeshD1, 5, 16), (std::vector<int>{4, 5}));
  EXPECT_EQ(comm_group(col, CommAxis::kMeshD2, 5, 16), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(comm_group(row, CommAxis::kData, 5, 16), (std::vector<int>{5, 13}));
  EXPECT_EQ(comm_group(Strategy::tp1d(4), CommAxis::kTensor, 9, 16), (std::vector<int>{8, 9, 10, 11}));
}

// Korthikanti et al. 2022, Table 2 (bytes with 16-bit activations), per layer.
TEST(Cost, ActivationMemoryMatchesKorthikantiTable2) {
  ModelSpec m = gpt();
  m.dtype = DType::kBFloat16;
  const int world = 8, t = 4;
  const double s = m.seq, h = m.hidden, a = m.heads;
  auto sbh = [&](const Strategy& st) { return s * local_batch(m, st, world) * h; };
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, kRel * want); };

  const Strategy dp = Strategy::dp();
  near(layer_activation_bytes(m, dp, dp, world), sbh(dp) * (34 + 5 * a * s / h));
  const Strategy tp = Strategy::tp1d(t);
  near(layer_activation_bytes(m, tp, tp, world), sbh(tp) * (10 + 24.0 / t + 5 * a * s / (h * t)));
  const Strategy sp = Strategy::tp1d(t, true);
  near(layer_activation_bytes(m, sp, sp, world), sbh(sp) / t * (34 + 5 * a * s / h));
  Strategy rc = Strategy::tp1d(t);
  rc.recompute = true;
  near(layer_activation_bytes(m, rc, rc, world), 2 * sbh(rc));
  // fp32 activations are twice the 16-bit figures.
  m.dtype = DType::kFloat32;
  near(layer_activation_bytes(m, tp, tp, world), 2 * sbh(tp) * (10 + 24.0 / t + 5 * a * s / (h * t)));
}

// Megatron-LM's fused softmax needs b·(heads per rank) a multiple of 4 (and of its batches per
// block: 4 rows at s = 1024) and 16 < s ≤ 4096 (fused_softmax.py is_kernel_available); where it
// cannot run, PyTorch's fp32 softmax moves 37 bytes a score instead of 4 and keeps 4-byte
// probabilities: Korthikanti's 5·a·s²·b becomes 7·a·s²·b.
TEST(Cost, MegatronSoftmaxFallsBackWhereItsKernelCannotRun) {
  ModelSpec m = gpt();
  m.dtype = DType::kBFloat16;
  m.seq = 1024;
  const int world = 8;
  const Strategy tp8 = Strategy::tp1d(8);  // 2 of the 16 heads per rank
  m.global_batch = 2;                      // b = 2 per rank: 4 score batches
  EXPECT_FALSE(softmax_unfused(m, tp8, world));
  EXPECT_FALSE(softmax_unfused(m, Strategy::tp1d(4), world));  // b = 1, 4 heads: 4
  m.global_batch = 1;                      // b = 1: 2 score batches
  EXPECT_TRUE(softmax_unfused(m, tp8, world));
  m.global_batch = 8;
  EXPECT_FALSE(softmax_unfused(m, tp8, world));
  ModelSpec longer = m;
  longer.seq = 8192;  // beyond the kernel's 4096
  EXPECT_TRUE(softmax_unfused(longer, tp8, world));
  longer.flash_attention = true;  // no separate softmax at all
  EXPECT_FALSE(softmax_unfused(longer, tp8, world));
  ModelSpec fp32 = m;
  fp32.dtype = DType::kFloat32;
  fp32.global_batch = 1;
  EXPECT_FALSE(softmax_unfused(fp32, tp8, world));

  m.global_batch = 1;
  const double s = m.seq, h = m.hidden, a = m.heads, b = local_batch(m, tp8, world), t = 8;
  const double scores = a / t * s * s * b;
  EXPECT_NEAR(attention_score_bytes(m, BlockKind::kAttention, tp8, world), scores * (37 + 5),
              kRel * scores * 42);
  const double sbh = s * b * h;
  EXPECT_NEAR(layer_activation_bytes(m, tp8, tp8, world),
              sbh * (10 + 24.0 / t) + 7 * a * s * s * b / t, kRel * sbh * 100);
  m.global_batch = 2;
  const double b2 = local_batch(m, tp8, world);
  EXPECT_NEAR(attention_score_bytes(m, BlockKind::kAttention, tp8, world),
              a / t * s * s * b2 * (4 + 5), kRel * s * s * b2 * 100);
}

TEST(Cost, FlopsAndParamsSplitByDegree) {
  const ModelSpec m = gpt();
  const double full = block_forward_flops(m, BlockKind::kMlp, local_batch(m, Strategy::tp1d(4), 8));
  EXPECT_DOUBLE_EQ(block_rank_flops(m, BlockKind::kMlp, Strategy::tp1d(4), 8), 3 * full / 4);
  EXPECT_DOUBLE_EQ(block_rank_params(m, BlockKind::kMlp, Strategy::dp()), double(m.mlp_params()));
  EXPECT_DOUBLE_EQ(block_rank_params(m, BlockKind::kAttention, Strategy::dp()),
                   double(m.attention_params()));
  EXPECT_LT(block_rank_params(m, BlockKind::kMlp, Strategy::tp2d(2, 2, true)), m.mlp_params() / 3.9);
}

}  // namespace
}  // namespace shardgym
