// Context parallelism as a plan part (`@cp(c)`, plan.h; docs/design.md §3 "Context
// parallelism"): a rank's attention FLOPs and memory, the ring's volume and groups, what is
// refused, and a long-context run that fits only with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runtime/core/cost.h"
#include "runtime/core/plan.h"
#include "runtime/sim/sim_run.h"
#include "sim_fixtures.h"

namespace shardgym {
namespace {

using testing::cluster;
using testing::experiment;
using testing::h100_sxm;
using testing::nvswitch;

// Llama 3 8B's shapes (arXiv 2407.21783, Table 3) at a long sequence.
ModelSpec llama_8b(int seq, int global_batch) {
  ModelSpec m;
  m.set_llama_traits();
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn = 14336;
  m.vocab = 128256;
  m.seq = seq;
  m.micro_batch = 1;
  m.global_batch = global_batch;
  m.flash_attention = true;
  m.main_grads_fp32 = true;
  m.distributed_optimizer = true;
  return m;
}

TEST(ContextParallel, PlanTextRoundTripsAndBadCountsAreRefused) {
  const Plan p = Plan::parse("uniform:tp1d(t=2,sp=1)@cp(2)", 64);
  EXPECT_EQ(p.pipeline.context, 2);
  EXPECT_EQ(Plan::parse(p.to_string(), 64), p);
  EXPECT_NE(p, Plan::parse("uniform:tp1d(t=2,sp=1)", 64));
  EXPECT_THROW(Plan::parse("uniform:dp@cp(0)", 64), std::invalid_argument);
  EXPECT_THROW(Plan::parse("uniform:dp@cp(x)", 64), std::invalid_argument);
  EXPECT_THROW(Plan::parse("uniform:dp@cp(2)@cp(2)", 64), std::invalid_argument);
}

// One sequence per data replica split over c = 2 ranks: each rank runs half the sequence's
// tokens through every GEMM and half its (causal, load-balanced) attention, and keeps half
// its activations, exactly.
TEST(ContextParallel, ARankDoesAndKeepsItsPartOfEachSequence) {
  const int world = 8;
  const ModelSpec whole = llama_8b(8192, 8);                   // one sequence per rank
  const ModelSpec parts = context_model(llama_8b(8192, 4), 2, world);  // one per 2 ranks
  EXPECT_EQ(parts.seq, 4096);
  EXPECT_EQ(parts.global_batch, 8);
  EXPECT_EQ(parts.full_seq(), 8192);
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    for (const Strategy& s : {Strategy::dp(), Strategy::tp1d(2, true)}) {
      EXPECT_DOUBLE_EQ(block_rank_flops(parts, kind, s, world),
                       block_rank_flops(whole, kind, s, world) / 2)
          << block_kind_name(kind) << " " << s.to_string();
      EXPECT_DOUBLE_EQ(block_activation_bytes(parts, kind, s, world, false),
                       block_activation_bytes(whole, kind, s, world, false) / 2);
      EXPECT_DOUBLE_EQ(block_rank_params(parts, kind, s), block_rank_params(whole, kind, s));
    }
  }
  // The attention core per rank: its 4096 queries against the 8192 keys, causal (half).
  const double h = 4096, s = 8192;
  EXPECT_DOUBLE_EQ(attention_core_flops(parts, BlockKind::kAttention, 1), 4 * (s / 2) * s * h / 2);
  // Learned positions (not Llama's) keep the whole sequence's table.
  ModelSpec gpt = parts;
  gpt.rotary = false;
  EXPECT_EQ(gpt.embedding_params(), int64_t(128256) * 4096 * 2 + int64_t(8192) * 4096 + 4096);
}

// The ring: each rank sends its part's K and V of its heads to the c − 1 others (an all-gather
// in volume) forward, and again with their gradients backward; groups are c consecutive
// replicas in Megatron's tensor-context-data order.
TEST(ContextParallel, TheRingMovesEveryPartsKeysAndValues) {
  const int world = 8;
  const ModelSpec parts = context_model(llama_8b(8192, 4), 2, world);
  const Strategy tp2 = Strategy::tp1d(2);
  const auto ring = block_context_collectives(parts, BlockKind::kAttention, tp2, world);
  ASSERT_EQ(ring.size(), 3u);
  EXPECT_TRUE(ring[0].forward);
  EXPECT_FALSE(ring[1].forward || ring[2].forward);
  // 4 sequences over DP 2 × CP 2: a tensor group holds halves of 2 sequences, each rank 4 of
  // the 8 K/V heads; with c = 2 a rank sends its parts' K and V once (c − 1 steps).
  const double part = 4096.0 * 2 * 4 * 128;  // tokens × (K and V) × heads × head dim
  EXPECT_DOUBLE_EQ(ring[0].elements_sent_per_rank(), 2 * part);
  EXPECT_TRUE(block_context_collectives(parts, BlockKind::kMlp, tp2, world).empty());
  EXPECT_TRUE(block_context_collectives(llama_8b(8192, 4), BlockKind::kAttention, tp2, world).empty());
  EXPECT_EQ(comm_group(tp2, CommAxis::kContext, 0, world, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(comm_group(tp2, CommAxis::kContext, 5, world, 2), (std::vector<int>{5, 7}));
  EXPECT_EQ(comm_group(tp2, CommAxis::kContext, 3, world, 2), (std::vector<int>{1, 3}));
}

TEST(ContextParallel, WhatItCannotRunIsRefusedWithTheReason) {
  const int blocks = 64;
  ModelSpec m = llama_8b(8192, 4);
  EXPECT_EQ(Plan::parse("uniform:tp1d(t=2,sp=1)@cp(2)", blocks).validate(m, 8), "");
  // DP = 8 / (2 · 2) = 2 replicas of 2 sequences each: m = 2 at micro-batch 1.
  EXPECT_EQ(plan_micro_batches(Plan::parse("uniform:tp1d(t=2,sp=1)@cp(2)", blocks), m, 8), 2);
  auto why = [&](const std::string& plan, const ModelSpec& model) {
    return Plan::parse(plan, blocks).validate(model, 8);
  };
  EXPECT_NE(why("uniform:tp1d(t=8)@cp(2)", m).find("do not group into the 2 ranks"),
            std::string::npos);
  ModelSpec no_flash = m;
  no_flash.flash_attention = false;
  EXPECT_NE(why("uniform:dp@cp(2)", no_flash).find("needs model.flash_attention"), std::string::npos);
  ModelSpec odd = m;
  odd.seq = 8190;
  EXPECT_NE(why("uniform:dp@cp(2)", odd).find("not 2·c=4 equal chunks"), std::string::npos);
  EXPECT_NE(why("uniform:dp@cp(16)", m).find("in a stage of 8"), std::string::npos);
}

// Llama 3 8B at 64k tokens on one H100 node, one sequence per iteration of 8: TP 8 alone holds
// a whole sequence's activations per rank; TP 4 with @cp(2) holds half of one, and pays the
// ring's exposed part, so it is slower but not by more than the ring moves.
TEST(ContextParallel, ALongContextRunHoldsHalfASequencePerRank) {
  ExperimentSpec spec = experiment(llama_8b(65536, 8), cluster(1, 8, h100_sxm(), nvswitch()));
  spec.initial_plan = "uniform:tp1d(t=8,sp=1)";
  SimRun run(spec);
  const int blocks = run.model().num_blocks();
  const Measurement tp8 = *run.estimate(Plan::parse("uniform:tp1d(t=8,sp=1)", blocks));
  const Measurement cp2 = *run.estimate(Plan::parse("uniform:tp1d(t=4,sp=1)@cp(2)", blocks));
  const Measurement tp4 = *run.estimate(Plan::parse("uniform:tp1d(t=4,sp=1)", blocks));
  ASSERT_TRUE(tp8.ok && cp2.ok && tp4.ok) << tp8.error << cp2.error << tp4.error;
  auto peak = [](const Measurement& x) {
    return *std::max_element(x.peak_memory_bytes.begin(), x.peak_memory_bytes.end());
  };
  // TP 4 without CP: 2 replicas, each a whole 64k sequence per micro-batch; with @cp(2) the same
  // 4-way shards hold half a sequence: less than TP 4 alone, and the same tokens per iteration.
  EXPECT_LT(peak(cp2), peak(tp4));
  EXPECT_DOUBLE_EQ(cp2.tokens, tp4.tokens);
  EXPECT_EQ(run.breakdown(Plan::parse("uniform:tp1d(t=4,sp=1)@cp(2)", blocks)).pipeline.micro_batches, 8);
  EXPECT_EQ(run.breakdown(Plan::parse("uniform:tp1d(t=4,sp=1)", blocks)).pipeline.micro_batches, 4);
}

}  // namespace
}  // namespace shardgym
