// Calibration, data placement and per-block costs of the simulator (calibration.h, layout.h,
// cost_model.h). Tolerance: closed forms of a few double operations, 1e-12 relative.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "runtime/sim/calibration.h"
#include "runtime/sim/cost_model.h"
#include "runtime/sim/layout.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

constexpr double kRel = 1e-12;

// The cost model of `c` under its default conditions with model `m`.
CostModel model_on(const ClusterSpec& c, const ModelSpec& m, CostTerms terms = {}) {
  CostModel cm(c, default_calibration(), terms);
  Conditions cond = cm.conditions();
  cond.model = m;
  cm.set_conditions(cond);
  return cm;
}

TEST(Calibration, MostSpecificRuleWins) {
  const Calibration c = parse_calibration(
      "# measured\n"
      "device,kind,min_gemm_dim,efficiency\n"
      "*,*,0,0.3\n"
      "*,*,1024,0.7\n"
      "H100,*,0,0.4\n"
      "H100,*,512,0.8\n"
      "*,attention,0,0.2\n",
      "calib.csv");
  EXPECT_DOUBLE_EQ(c.efficiency("A100", "mlp", 100), 0.3);
  EXPECT_DOUBLE_EQ(c.efficiency("A100", "mlp", 4096), 0.7);
  EXPECT_DOUBLE_EQ(c.efficiency("A100", "attention", 4096), 0.2);
  EXPECT_DOUBLE_EQ(c.efficiency("H100", "attention", 600), 0.8);
  EXPECT_DOUBLE_EQ(c.efficiency("H100", "mlp", 10), 0.4);
}

TEST(Calibration, ErrorsNameTheLine) {
  auto message = [](const std::string& text) {
    try {
      parse_calibration(text, "c.csv");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("*,*,0\n").find("c.csv:1: expected 4 columns"), std::string::npos);
  EXPECT_NE(message("*,*,0,0.5\n*,conv,0,0.5\n").find("c.csv:2: kind 'conv'"), std::string::npos);
  EXPECT_NE(message("*,*,0,1.5\n").find("outside (0, 1]"), std::string::npos);
  EXPECT_NE(message("*,*,x,0.5\n").find("min_gemm_dim 'x' is not a number"), std::string::npos);
  EXPECT_NE(message("# nothing\n").find("no calibration rules"), std::string::npos);
  EXPECT_THROW(load_calibration("/nonexistent/calib.csv"), std::runtime_error);
}

TEST(Calibration, LoadsAFile) {
  const std::string path = ::testing::TempDir() + "sim_calibration_test.csv";
  std::ofstream(path) << "*,*,0,0.5\n";
  const Calibration c = load_calibration(path);
  EXPECT_EQ(c.source(), path);
  EXPECT_DOUBLE_EQ(c.efficiency("any", "mlp", 1), 0.5);
  std::remove(path.c_str());
}

TEST(Calibration, RooflineTakesTheSlowerLimit) {
  const Calibration c = parse_calibration("*,*,0,0.5\n", "t");
  // Square GEMM: compute-bound. Thin GEMM (k = 8): memory-bound.
  const Gemm big{4096, 4096, 4096, 1}, thin{65536, 8, 4096, 1};
  EXPECT_NEAR(gemm_time({big}, 1e15, 3e12, 2, c, "d", "mlp"), big.flops() / 5e14, kRel);
  const double bytes = 2 * (65536.0 * 8 + 8 * 4096.0 + 65536.0 * 4096);
  EXPECT_NEAR(gemm_time({thin}, 1e15, 3e12, 2, c, "d", "mlp"), bytes / 3e12, kRel);
}

// A device with a measured GEMM fixed time (hardware.yaml gemm_fixed_us): each kernel costs
// it plus its roofline at the device's large-GEMM rate, whatever the table says; a batched
// GEMM is one kernel, a chunked one a kernel per chunk.
TEST(Calibration, AGemmsFixedTimeIsItsShapeCurve) {
  const Calibration c = default_calibration();  // its shape table must not apply
  const double t0 = 7e-6, peak = 7.5e14, bw = 3e12;
  const Gemm big{8192, 8192, 8192, 1}, tiny{128, 128, 128, 1}, chunked{2048, 4096, 4096, 4, 4};
  EXPECT_NEAR(gemm_time({big}, peak, bw, 2, c, "d", "mlp", t0), big.flops() / peak + t0, kRel);
  EXPECT_LT(t0 / (big.flops() / peak), 1e-2);  // compute-bound: the fixed time is noise
  const double tiny_bytes = 2 * 3 * 128.0 * 128;
  EXPECT_NEAR(gemm_time({tiny}, peak, bw, 2, c, "d", "mlp", t0), t0 + tiny_bytes / bw, kRel);
  EXPECT_GT(t0 / gemm_time({tiny}, peak, bw, 2, c, "d", "mlp", t0), 0.99);  // launch-bound
  EXPECT_NEAR(gemm_time({chunked}, peak, bw, 2, c, "d", "mlp", t0),
              chunked.flops() / peak + 4 * t0, kRel);
  const Gemm batched{128, 64, 128, 32};  // 32 heads' products in one kernel
  EXPECT_NEAR(gemm_time({batched}, peak, 0, 2, c, "d", "attention", t0),
              batched.flops() / peak + t0, kRel);
}

TEST(Layout, RepartitionMovesOnlyMissingShards) {
  // MLP tp1d(t=2) → tp1d(t=4) on 4 ranks. Under t=2, rank r holds fc1 columns / fc2 rows
  // [(r%2)·f/2, …); under t=4 it needs [r·f/4, …). Ranks 0 and 3 already hold theirs;
  // ranks 1 and 2 receive a quarter of fc1 (h·f/4 + f/4 bias) and of fc2 (f/4·h).
  ModelSpec m = testing::gpt(1, 1024, 16, 512, 1);
  const ClusterSpec c = testing::cluster(1, 4, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  const double h = 1024, f = 4096, per_param = 14;
  const TransferCost t = repartition_cost(m, BlockKind::kMlp, Strategy::tp1d(2),
                                          Strategy::tp1d(4), per_param, c, links);
  const double rank_bytes = (h * f / 4 + f / 4 + f / 4 * h) * per_param;
  EXPECT_NEAR(t.bytes, 2 * rank_bytes, kRel * rank_bytes);
  EXPECT_NEAR(t.max_rank_bytes, rank_bytes, kRel * rank_bytes);
  EXPECT_NEAR(t.time_s, 3e-6 + rank_bytes / 450e9, kRel * t.time_s);
  // Unchanged or equivalent placements move nothing; dp holds everything already.
  for (auto [a, b] : {std::pair{Strategy::tp1d(4), Strategy::tp1d(4, true)},
                      std::pair{Strategy::tp1d(4), Strategy::tp2d(4, 1, false)},
                      std::pair{Strategy::dp(), Strategy::tp2d(2, 2, true)}}) {
    EXPECT_EQ(repartition_cost(m, BlockKind::kAttention, a, b, per_param, c, links).bytes, 0)
        << a.to_string() << " -> " << b.to_string();
  }
  // tp1d(4) → dp: every rank fetches the 3/4 of the sharded tensors it lacks.
  const double sharded = 3 * h * h + 3 * h + h * h;  // QKV weight + bias, out weight
  const TransferCost back = repartition_cost(m, BlockKind::kAttention, Strategy::tp1d(4),
                                             Strategy::dp(), per_param, c, links);
  EXPECT_NEAR(back.bytes, 4 * 0.75 * sharded * per_param, kRel * back.bytes);
}

TEST(Layout, RedistributionFromDataToTensorParallel) {
  // dp → tp1d(t=4) on 4 ranks, global batch 4: each rank gathers the 3 sequences it lacks;
  // back to dp every rank already holds its own sequence.
  const ModelSpec m = testing::gpt(1, 1024, 16, 512, 1);
  const ClusterSpec c = testing::cluster(1, 4, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  const double seq_bytes = 512.0 * 1024 * 2;
  const TransferCost fwd = redistribution_cost(m, Strategy::dp(), Strategy::tp1d(4), c, links);
  EXPECT_NEAR(fwd.bytes, 4 * 3 * seq_bytes, kRel * fwd.bytes);
  EXPECT_EQ(redistribution_cost(m, Strategy::tp1d(4), Strategy::dp(), c, links).bytes, 0);
  // tp1d(4) → tp1d(4, sp): sequence-sharded is a subset of replicated: nothing to move;
  // the way back gathers the other 3/4 of the positions.
  EXPECT_EQ(redistribution_cost(m, Strategy::tp1d(4), Strategy::tp1d(4, true), c, links).bytes, 0);
  const TransferCost gather =
      redistribution_cost(m, Strategy::tp1d(4, true), Strategy::tp1d(4), c, links);
  EXPECT_NEAR(gather.bytes, 4 * 0.75 * 4 * seq_bytes, kRel * gather.bytes);
}

TEST(CostModel, HeterogeneousGroupRunsAtItsSlowestMember) {
  const ModelSpec m = testing::gpt(1, 4096, 32, 1024, 1);
  ClusterSpec mixed = testing::cluster(2, 4, testing::h100_sxm(), testing::nvswitch());
  mixed.devices.push_back(testing::a100_pcie());
  mixed.nodes[1].device = "A100-PCIe-80GB";
  ClusterSpec slow = testing::cluster(2, 4, testing::a100_pcie(), testing::nvswitch());
  ClusterSpec fast = testing::cluster(2, 4, testing::h100_sxm(), testing::nvswitch());
  auto fwd = [&](const ClusterSpec& c, const Strategy& s) {
    return model_on(c, m).block_cost(BlockKind::kMlp, s).fwd_s;
  };
  const Strategy t8 = Strategy::tp1d(8);
  EXPECT_DOUBLE_EQ(fwd(mixed, t8), fwd(slow, t8));
  EXPECT_GT(fwd(mixed, t8), 2 * fwd(fast, t8));
}

// The GEMM fixed time in a block: a tiny layer's forward is its GEMM kernels' fixed times
// (launch-bound; its bytes over HBM add under 2 %), a large one's its FLOPs at gemm_efficiency
// (compute-bound, the fixed times under 1 %), and chunking the tiny layer adds a fixed time
// per chunk and GEMM.
TEST(CostModel, GemmFixedTimeBoundsATinyLayerNotALargeOne) {
  DeviceType dev = testing::h100_sxm();
  dev.gemm_efficiency = 0.75;
  dev.gemm_fixed_s = 7e-6;
  const ClusterSpec c = testing::cluster(1, 1, dev, testing::nvswitch());
  auto mlp_fwd = [&](int hidden, int seq, int chunks) {
    Strategy s = Strategy::dp();
    s.chunks = chunks;
    return model_on(c, testing::gpt(1, hidden, hidden / 64, seq, 1))
        .block_cost(BlockKind::kMlp, s)
        .fwd_s;
  };
  EXPECT_NEAR(mlp_fwd(128, 128, 1), 2 * dev.gemm_fixed_s, 0.02 * 2 * dev.gemm_fixed_s);
  EXPECT_NEAR(mlp_fwd(128, 128, 2), 4 * dev.gemm_fixed_s, 0.02 * 4 * dev.gemm_fixed_s);
  const double flops = 2 * 2.0 * 2048 * 8192 * 4 * 8192;  // fc1 and fc2 of one sequence
  const double compute = flops / (dev.peak_flops * dev.gemm_efficiency);
  EXPECT_NEAR(mlp_fwd(8192, 2048, 1), compute + 2 * dev.gemm_fixed_s, kRel * compute);
  EXPECT_LT(2 * dev.gemm_fixed_s / compute, 0.01);
}

// The LM head's cross-entropy costs the HBM traffic of Megatron-Core's unfused
// vocab_parallel_cross_entropy, kernel by kernel: 40 B per logit, plus 2·(e + 4) B for the
// casts to and from fp32 when the model's dtype (e bytes) is not fp32: 52 B in bf16 or fp16.
TEST(CostModel, CrossEntropyMovesMegatronCoresBytesPerLogit) {
  DeviceType dev = testing::h100_sxm();
  dev.memory_efficiency = 0.85;
  const ClusterSpec c = testing::cluster(1, 8, dev, testing::nvswitch());
  auto head_s = [&](DType dtype, bool memory_bound) {
    ModelSpec m = testing::gpt(2, 1024, 16, 512, 1);
    m.global_batch = 16;  // 2 sequences per rank
    m.dtype = dtype;
    return model_on(c, m, CostTerms{memory_bound}).head_cost().compute_s;
  };
  const double logits = 2.0 * 512 * ModelSpec{}.vocab;  // tokens per rank × vocabulary
  const double bw = dev.memory_bw * dev.memory_efficiency;
  for (DType d : {DType::kBFloat16, DType::kFloat16})
    EXPECT_NEAR(head_s(d, true) - head_s(d, false), 52 * logits / bw, 1e-12) << dtype_name(d);
  EXPECT_NEAR(head_s(DType::kFloat32, true) - head_s(DType::kFloat32, false), 40 * logits / bw,
              1e-12);
}

TEST(CostModel, StragglerAndChunkOverlap) {
  const ModelSpec m = testing::gpt(1, 4096, 32, 1024, 2);
  const ClusterSpec c = testing::cluster(1, 8, testing::a100_pcie(), testing::pcie4());
  CostModel cm = model_on(c, m);
  Conditions cond = cm.conditions();
  Strategy s = Strategy::tp1d(8);
  const BlockCost base = cm.block_cost(BlockKind::kMlp, s);
  cond.slowdown[5] = 1.5;
  cm.set_conditions(cond);
  const BlockCost slow = cm.block_cost(BlockKind::kMlp, s);
  EXPECT_NEAR(slow.fwd_s, 1.5 * base.fwd_s, kRel * slow.fwd_s);
  EXPECT_DOUBLE_EQ(slow.tp_comm_fwd_s, base.tp_comm_fwd_s);
  EXPECT_DOUBLE_EQ(slow.tp_comm_bwd_s, base.tp_comm_bwd_s);
  // The fc1 input-gradient all-reduce runs under fc1's weight-gradient GEMM: on PCIe it is
  // longer than that GEMM, so a slower GEMM hides more of it, never less.
  EXPECT_GT(base.tp_comm_bwd_hidden_s, 0);
  EXPECT_LT(base.tp_comm_bwd_hidden_s, base.tp_comm_bwd_s / 2);  // 1 of the 2 bwd collectives
  EXPECT_NEAR(slow.tp_comm_bwd_hidden_s, 1.5 * base.tp_comm_bwd_hidden_s,
              kRel * slow.tp_comm_bwd_hidden_s);
  EXPECT_NEAR(slow.comm_s, base.comm_s - 0.5 * base.tp_comm_bwd_hidden_s, kRel * base.comm_s);
  // Two chunks: per pass exposed = C/2 + max(0, C − T)/2, each chunk paying its own α.
  s.chunks = 2;
  const BlockCost ch = cm.block_cost(BlockKind::kMlp, s);
  auto exposed = [](double comm, double compute) { return comm / 2 + 0.5 * std::max(0.0, comm - compute); };
  const double expect = exposed(ch.tp_comm_fwd_s, ch.fwd_s) +
                        exposed(ch.tp_comm_bwd_s - ch.tp_comm_bwd_hidden_s, ch.bwd_s);
  EXPECT_NEAR(ch.comm_s, expect, kRel * expect);
  EXPECT_GT(ch.tp_comm_fwd_s, base.tp_comm_fwd_s);  // one more α per collective
  EXPECT_LT(ch.comm_s, base.comm_s);
}

// Uneven tp1d shards (strategy.h heads=): a rank with fewer heads computes less, so a straggler
// given fewer heads no longer sets the group's pace, while the collectives stay the even
// split's. Without a straggler the even split is the fastest.
TEST(CostModel, UnevenHeadsShiftWorkOffASlowRank) {
  const ModelSpec m = testing::gpt(1, 4096, 32, 1024, 2);
  const ClusterSpec c = testing::cluster(1, 4, testing::h100_sxm(), testing::nvswitch());
  CostModel cm = model_on(c, m);
  Conditions cond = cm.conditions();
  const Strategy even = Strategy::tp1d(4);
  const Strategy uneven = Strategy::parse("tp1d(t=4,heads=9/9/9/5)");  // rank 3: 5 of 32 heads
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    const BlockCost e = cm.block_cost(kind, even), u = cm.block_cost(kind, uneven);
    EXPECT_GT(u.fwd_s, e.fwd_s);  // ranks 0-2 hold 9/8 of the even work
    EXPECT_DOUBLE_EQ(u.tp_comm_fwd_s, e.tp_comm_fwd_s);
    EXPECT_DOUBLE_EQ(u.tp_comm_bwd_s, e.tp_comm_bwd_s);
    EXPECT_GT(u.params_per_rank, e.params_per_rank);  // the fullest rank's
  }
  cond.slowdown[3] = 1.6;  // rank 3 at 1/1.6 of its speed: 9 : 9 : 9 : 5 ≈ 1 : 1 : 1 : 1/1.6
  cm.set_conditions(cond);
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    const BlockCost e = cm.block_cost(kind, even), u = cm.block_cost(kind, uneven);
    EXPECT_LT(u.fwd_s, 0.8 * e.fwd_s) << block_kind_name(kind);
    EXPECT_LT(u.bwd_s, 0.8 * e.bwd_s) << block_kind_name(kind);
  }
}

}  // namespace
}  // namespace shardgym
