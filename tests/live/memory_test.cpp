// Measured peak memory per rank (counting allocator keyed by rank) against the analytic
// estimate (runtime/core/live_memory.h: runtime/core's parameter and Korthikanti activation formulas,
// adjusted to the live layers), for every strategy kind on 4 rank threads.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/live/driver/live_run.h"
#include "runtime/core/live_memory.h"
#include "runtime/sim/sim_run.h"
#include "tests/live/live_test_spec.h"

namespace shardgym::live {
namespace {

// The brief's bound. What the estimate leaves out (allocator-visible temporaries of
// collectives and of the backward) and what it over-counts (activations freed early) stay
// well inside it for these shapes.
constexpr double kTolerance = 0.15;

void expect_peaks_match(ExperimentSpec spec, const std::string& what, int micro_batches = 1) {
  LiveRun run(spec);
  run.set_micro_batches(micro_batches);
  const int blocks = run.model().num_blocks();
  run.reset(0, Plan::uniform(Strategy::dp(), blocks));
  for (const char* text :
       {"uniform:dp", "uniform:tp1d(t=2)", "uniform:tp1d(t=4)", "uniform:tp1d(t=4,sp=1)",
        "uniform:tp2d(d1=2,d2=2,first=row)", "uniform:tp2d(d1=2,d2=2,first=col)",
        "uniform:tp1d(t=4,recompute=1)", "uniform:tp1d(t=2,chunks=2)",
        "attn=tp1d(t=4,sp=1)|mlp=tp2d(d1=2,d2=2,first=row)"}) {
    const Plan plan = Plan::parse(text, blocks);
    ASSERT_TRUE(run.step(plan).ok);        // repartitions (its buffers count in this peak)
    const Measurement m = run.step(plan);  // a training iteration alone, AdamW moments held
    ASSERT_TRUE(m.ok) << m.error;
    const double estimate = live_memory_estimate(run.model(), plan, 4, micro_batches).total();
    const double whole = live_memory_estimate(run.model(), plan, 4).total();
    ASSERT_EQ(m.peak_memory_bytes.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      EXPECT_NEAR(m.peak_memory_bytes[r] / estimate, 1.0, kTolerance)
          << what << ", m = " << micro_batches << ", " << text << ", rank " << r
          << ": measured " << m.peak_memory_bytes[r]
          << " B, estimated " << estimate << " B";
      // Micro-batching shows: the peak is out of reach of the whole batch's estimate.
      if (micro_batches > 1) {
        EXPECT_LT(m.peak_memory_bytes[r] / whole, 1.0 - kTolerance)
            << what << ", m = " << micro_batches << ", " << text << ", rank " << r
            << ": measured " << m.peak_memory_bytes[r] << " B, whole batch estimated " << whole
            << " B";
      }
    }
  }
}

// tiny_live_spec on 4 rank threads with the model's layers, hidden size and sequence length.
ExperimentSpec memory_spec(int layers, int hidden, int seq) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.model.layers = layers;
  spec.model.hidden = hidden;
  spec.model.seq = seq;
  return spec;
}

TEST(Memory, PeakPerRankMatchesTheEstimateActivationHeavy) {
  // The quickstart's shapes: activations and state of the same order.
  expect_peaks_match(memory_spec(4, 64, 64), "h=64 s=64");
}

// Gradient accumulation keeps one micro-batch's activations alive at a time: with 2
// micro-batches the peaks match the estimate for 2 and stay clear of the whole batch's.
TEST(Memory, PeakPerRankMatchesTheEstimateWithTwoMicroBatches) {
  expect_peaks_match(memory_spec(4, 64, 64), "h=64 s=64", 2);
}

// Llama's blocks (8 heads in 4 query groups, SwiGLU of 160, RMSNorm, rotary, no biases):
// runtime/core's Llama activations and parameters, the same live adjustments.
TEST(Memory, PeakPerRankMatchesTheEstimateWithLlamaBlocks) {
  ExperimentSpec spec = memory_spec(4, 64, 64);
  spec.model.set_llama_traits();
  spec.model.heads = 8;
  spec.model.kv_heads = 4;
  spec.model.ffn = 160;
  expect_peaks_match(spec, "llama h=64 s=64");
}

TEST(Memory, PeakPerRankMatchesTheEstimateStateHeavy) {
  expect_peaks_match(memory_spec(2, 128, 32), "h=128 s=32");  // tiny_live_spec's 2 layers
}

// Pipelined plans (stages on consecutive ranks, TP or DP inside, 1F1B and GPipe, recomputed
// blocks, stages of one layer): every rank's peak against its own stage's estimate. The
// estimate's structure is what the meter showed at a stage's peak (docs/live-fidelity.md,
// "What a stage holds at its peak"); before it, one-layer stages were off by up to 66 %.
TEST(Memory, PipelinedPeakPerRankMatchesItsStagesEstimate) {
  constexpr double kStageTolerance = 0.10;
  const ExperimentSpec spec = memory_spec(4, 64, 64);
  LiveRun run(spec);
  const int blocks = run.model().num_blocks();
  run.reset(0, Plan::uniform(Strategy::dp(), blocks));
  for (const char* text :
       {"uniform:dp@pp(p=2,m=1,split=3/1)", "uniform:dp@pp(p=2,m=4,split=1/3)",
        "uniform:tp1d(t=2)@pp(p=2,m=2,schedule=gpipe)",
        "dp;dp(recompute=1);3*dp;dp(recompute=1);2*dp@pp(p=2,m=2,split=1/3)",
        "uniform:dp(recompute=1)@pp(p=2,m=1,schedule=gpipe,split=3/1)",
        "uniform:dp@pp(p=4,m=4)", "uniform:dp(chunks=2)@pp(p=4,m=2,schedule=gpipe)"}) {
    const Plan plan = Plan::parse(text, blocks);
    ASSERT_TRUE(run.step(plan).ok) << text;  // repartitions
    const Measurement m = run.step(plan);
    ASSERT_TRUE(m.ok) << m.error;
    const std::vector<MemoryEstimate> stages =
        live_stage_memory_estimates(run.model(), plan, 4, plan.pipeline.micro_batches);
    ASSERT_EQ(stages.size(), static_cast<size_t>(plan.stages()));
    const int per_stage = 4 / plan.stages();
    for (int r = 0; r < 4; ++r) {
      const double estimate = stages[r / per_stage].total();
      EXPECT_NEAR(m.peak_memory_bytes[r] / estimate, 1.0, kStageTolerance)
          << text << ", rank " << r << ": measured " << m.peak_memory_bytes[r]
          << " B, estimated " << estimate << " B";
    }
  }
}

// Two live runs alive in one process (eval's agent env and its Megatron-LM reference) each
// report their own ranks' memory: the second run's peaks are the first's, not the first's
// state plus its own (before the meter's slots were leased per run, rank r of both counted in
// one slot).
TEST(Memory, TwoLiveRunsInOneProcessCountTheirOwnMemory) {
  const ExperimentSpec spec = memory_spec(4, 64, 64);
  const Plan plan = Plan::uniform(Strategy::tp1d(2), 8);
  LiveRun first(spec);
  first.reset(0, plan);
  const Measurement a = first.step(plan);
  ASSERT_TRUE(a.ok) << a.error;
  LiveRun second(spec);  // while `first` holds its state
  second.reset(0, plan);
  const Measurement b = second.step(plan);
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_EQ(a.peak_memory_bytes.size(), b.peak_memory_bytes.size());
  // Within 5 %: a first run in a process also makes a few one-time buffers (b / a was 0.988
  // after other tests had run); counting the first run's state made it about 1.3.
  for (size_t r = 0; r < a.peak_memory_bytes.size(); ++r)
    EXPECT_NEAR(b.peak_memory_bytes[r] / a.peak_memory_bytes[r], 1.0, 0.05)
        << "rank " << r << ": " << a.peak_memory_bytes[r] << " B alone, "
        << b.peak_memory_bytes[r] << " B beside it";
}

// What a repartition holds on top of the state (runtime/live/tp/repartition.cpp: one block at a
// time, its new state and one message in transit, after what the blocks before it freed) is
// what the simulator predicts from the same geometry, to the byte, over random plan changes.
void expect_repartition_peaks_predicted(int ranks, uint32_t seed,
                                        const std::vector<const char*>& uneven = {}) {
  ExperimentSpec spec = tiny_live_spec(ranks, "threads");
  spec.model.layers = 3;
  spec.model.hidden = 64;
  if (!uneven.empty()) spec.model.heads = 8;
  spec.scenario.noise = 0;
  LiveRun live(spec);
  SimRun sim(spec);
  const int blocks = live.model().num_blocks();
  std::vector<Strategy> pool;
  for (const char* s : {"dp", "tp1d(t=2)", "tp1d(t=4)", "tp1d(t=4,sp=1)", "tp1d(t=2,chunks=2)",
                        "tp2d(d1=2,d2=2,first=row)", "tp2d(d1=2,d2=2,first=col)",
                        "tp1d(t=4,recompute=1)"}) {
    const Strategy st = Strategy::parse(s);
    if (ranks % st.degree() == 0) pool.push_back(st);
  }
  for (const char* s : uneven) pool.push_back(Strategy::parse(s));
  std::mt19937 rng(seed);
  Plan plan = Plan::uniform(Strategy::dp(), blocks);
  live.reset(0, plan);
  sim.reset(0, plan);
  int moved = 0, received = 0;
  for (int step = 0; step < 8; ++step) {
    for (int b = 0; b < blocks; ++b)
      if (rng() % 2) plan.blocks[b] = pool[rng() % pool.size()];
    ASSERT_EQ(plan.validate(live.model(), ranks), "");
    const Measurement l = live.step(plan);
    const Measurement s = sim.step(plan);
    ASSERT_TRUE(l.ok) << l.error;
    EXPECT_EQ(l.repartition_bytes, s.repartition_bytes) << plan.to_string();
    // To the byte, but for one word: the rank reads what it holds when the repartition begins,
    // and once, under the load of a parallel ctest, the live peak came out 8 B (of 387 kB)
    // under the prediction, which the test alone never repeated (cause not established; a
    // scalar of the step before freed in between would do it).
    EXPECT_NEAR(l.repartition_peak_bytes, s.repartition_peak_bytes, 8)
        << "step " << step << " into " << plan.to_string();
    moved += l.repartition_peak_bytes > 0;
    received += l.repartition_bytes > 0;
  }
  EXPECT_GE(moved, 4);  // (dp → tp1d receives nothing, but still allocates the new state)
  EXPECT_GE(received, 1);
}

TEST(Memory, RepartitionPeakIsWhatTheSimulatorPredictsFourRanks) {
  expect_repartition_peaks_predicted(4, 11);
}

TEST(Memory, RepartitionPeakIsWhatTheSimulatorPredictsTwoRanks) {
  expect_repartition_peaks_predicted(2, 12);
}

// Uneven shards (docs/design.md §11): the ranks of a tensor group hold different amounts, and
// a rank whose boxes stay (3/1/2/2 -> 3/2/1/2 keeps ranks 0 and 3) allocates nothing, so the
// simulator sums per rank. Summed with the fullest rank's figures as for even layouts, the
// prediction was off by a median 26 % (validate-sim on experiments/live-uneven-heads.yaml).
TEST(Memory, RepartitionPeakIsWhatTheSimulatorPredictsWithUnevenHeads) {
  expect_repartition_peaks_predicted(4, 13,
                                     {"tp1d(t=4,heads=1/3/2/2)", "tp1d(t=4,heads=3/1/2/2)",
                                      "tp1d(t=4,heads=3/2/1/2)", "tp1d(t=4,sp=1,heads=3/2/2/1)",
                                      "tp1d(t=2,heads=2/6)", "tp1d(t=2,heads=6/2)"});
  expect_repartition_peaks_predicted(2, 14, {"tp1d(t=2,heads=2/6)", "tp1d(t=2,heads=6/2)",
                                             "tp1d(t=2,heads=5/3)"});
}

TEST(Memory, EstimateCountsStateByDtypeAndShrinksWithTheDegree) {
  ModelSpec m = tiny_live_spec(4, "threads").model;
  const int blocks = m.num_blocks();
  const MemoryEstimate dp = live_memory_estimate(m, Plan::uniform(Strategy::dp(), blocks), 4);
  const MemoryEstimate tp = live_memory_estimate(m, Plan::uniform(Strategy::tp1d(4), blocks), 4);
  EXPECT_LT(tp.state_bytes, dp.state_bytes);
  double params = static_cast<double>(m.embedding_params());
  for (int b = 0; b < blocks; ++b) params += static_cast<double>(m.block_params(b));
  EXPECT_DOUBLE_EQ(dp.state_bytes, params * 16);  // fp32 param, grad, exp_avg, exp_avg_sq
  m.dtype = DType::kFloat64;
  EXPECT_DOUBLE_EQ(live_memory_estimate(m, Plan::uniform(Strategy::dp(), blocks), 4).state_bytes,
                   params * 32);
}

// A pipeline's last stage holds its blocks, the final norm and the LM head (tied: a copy of
// wte), not the first stage's token and position embeddings (before: counted on both).
TEST(Memory, EstimateCountsTheLastStagesOwnParameters) {
  ModelSpec m = memory_spec(4, 64, 64).model;
  const Plan plan = Plan::parse("uniform:dp@pp(p=2,m=1,split=1/3)", m.num_blocks());
  for (const bool tied : {false, true}) {
    m.tied_embeddings = tied;
    double params = static_cast<double>(m.norm_params_per_hidden()) * m.hidden +
                    static_cast<double>(m.vocab) * m.hidden;  // ln_f, the LM head or wte's copy
    for (int b = 2; b < m.num_blocks(); ++b) params += static_cast<double>(m.block_params(b));
    EXPECT_DOUBLE_EQ(live_memory_estimate(m, plan, 4).state_bytes, params * 16)
        << (tied ? "tied" : "untied");
  }
}

}  // namespace
}  // namespace shardgym::live
