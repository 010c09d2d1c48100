// model.micro_batch as Megatron-LM's micro-batch for every plan (docs/design.md §3,
// "Micro-batches"; docs/configs.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runtime/core/plan.h"
#include "runtime/sim/sim_run.h"
#include "sim_fixtures.h"

namespace shardgym {
namespace {

using testing::gpt;

// The published table's cluster: 6 nodes of 8 H100s over NVSwitch.
ExperimentSpec on_48_h100s(const ModelSpec& m) {
  return testing::experiment(m, testing::cluster(6, 8, testing::h100_sxm(), testing::nvswitch()));
}

// Megatron-Core's 1.7B GPT of its published table (experiments/validation/
// megatron-core-h100-1.7b.yaml): 48 GPUs, global batch 192, micro-batch 1, sequence 4096.
ModelSpec gpt_1_7b(int micro_batch) {
  ModelSpec m = gpt(24, 2048, 16, 4096, micro_batch);
  m.vocab = 131072;
  m.global_batch = 192;
  m.flash_attention = true;
  return m;
}

TEST(MicroBatches, MegatronsRuleForEveryPlan) {
  ModelSpec m = gpt_1_7b(1);
  const int blocks = m.num_blocks();
  // No pipeline part: m = G / (micro · DP).
  EXPECT_EQ(plan_micro_batches(Plan::uniform(Strategy::dp(), blocks), m, 48), 4);
  EXPECT_EQ(plan_micro_batches(Plan::uniform(Strategy::tp1d(8), blocks), m, 48), 32);
  // Mixed degrees: DP at the lowest degree, so every block's share of a micro-batch is whole.
  Plan mixed = Plan::uniform(Strategy::tp1d(8), blocks);
  mixed.blocks[5] = Strategy::tp1d(2);
  EXPECT_EQ(plan_micro_batches(mixed, m, 48), 192 / 24);
  EXPECT_EQ(mixed.validate(m, 48), "");
  // A written m wins; a pipeline's stages shrink DP.
  EXPECT_EQ(plan_micro_batches(Plan::parse("uniform:dp@pp(m=2)", blocks), m, 48), 2);
  EXPECT_EQ(plan_micro_batches(Plan::parse("uniform:tp1d(t=4)@pp(p=2)", blocks), m, 48),
            192 / (48 / 2 / 4));
  // A share of at most one micro-batch runs at once.
  m.micro_batch = 4;
  EXPECT_EQ(plan_micro_batches(Plan::uniform(Strategy::dp(), blocks), m, 48), 1);
  m.micro_batch = 8;
  EXPECT_EQ(plan_micro_batches(Plan::uniform(Strategy::dp(), blocks), m, 48), 1);
  EXPECT_EQ(Plan::uniform(Strategy::dp(), blocks).validate(m, 48), "");
  // More than one micro-batch but not a whole number of them: refused, with both numbers.
  m.micro_batch = 3;
  const std::string why = Plan::uniform(Strategy::dp(), blocks).validate(m, 48);
  EXPECT_NE(why.find("replicas 4, not a whole number of micro-batches of 3"), std::string::npos)
      << why;
  EXPECT_EQ(Plan::parse("uniform:dp@pp(m=4)", blocks).validate(m, 48), "");  // written m
  // The simulator refuses it too, not only validate(): estimate() of the plan fails with it.
  ExperimentSpec spec = on_48_h100s(m);
  spec.initial_plan = "uniform:dp@pp(m=4)";
  SimRun run(spec);
  const Measurement e = *run.estimate(Plan::uniform(Strategy::dp(), blocks));
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.error.find("not a whole number of micro-batches of 3"), std::string::npos) << e.error;
}

// The example: at micro-batch 1 the 1.7B run holds one sequence's activations, not
// its replica's four, and costs what the same plan with m = 4 written costs.
TEST(MicroBatches, MicroBatchSetsTheActivationsHeld) {
  auto run_of = [](int micro_batch, const std::string& plan) {
    ExperimentSpec spec = on_48_h100s(gpt_1_7b(micro_batch));
    spec.initial_plan = plan;
    return std::make_unique<SimRun>(spec);
  };
  auto peak = [](const Measurement& x) {
    return *std::max_element(x.peak_memory_bytes.begin(), x.peak_memory_bytes.end());
  };
  auto one = run_of(1, "uniform:dp");
  auto four = run_of(4, "uniform:dp");
  auto written = run_of(4, "uniform:dp@pp(m=4)");
  const Measurement a = *one->estimate(one->plan());
  const Measurement b = *four->estimate(four->plan());
  const Measurement c = *written->estimate(written->plan());
  EXPECT_TRUE(a.ok && b.ok && c.ok);
  EXPECT_EQ(peak(a), peak(c));
  EXPECT_EQ(a.step_latency_s, c.step_latency_s);
  // Weights, gradients and optimizer state are the same; the activations are a quarter.
  EXPECT_LT(peak(a), peak(b));
  EXPECT_LT(peak(a), 80e9);
  // Four micro-batches pay four passes' fixed costs: never faster than one of four sequences.
  EXPECT_GE(a.step_latency_s, b.step_latency_s);
}

// An episode keeps its initial plan's m through a batch event (its micro-batches grow); a plan
// priced on its own after the event gets Megatron-LM's m for the batch then.
TEST(MicroBatches, AnEpisodeKeepsItsMAndAPlanAloneTakesTheBatchNow) {
  ExperimentSpec spec = on_48_h100s(gpt_1_7b(1));
  spec.initial_plan = "uniform:dp";
  spec.scenario.events = {{1, EventKind::kBatch, "", -1, 1.0, 384}};
  SimRun run(spec);
  EXPECT_EQ(run.plan().pipeline.micro_batches, 4);  // written at the start: 192 / (1 · 48)
  run.reset(0, run.plan());
  const Measurement before = run.step(run.plan());
  const Measurement after = run.step(run.plan());
  EXPECT_EQ(run.breakdown(run.plan()).pipeline.micro_batches, 4);
  EXPECT_GT(after.peak_memory_bytes[0], before.peak_memory_bytes[0]);  // 2 sequences each
  const Plan alone = Plan::uniform(Strategy::dp(), run.model().num_blocks());
  EXPECT_EQ(run.breakdown(alone).pipeline.micro_batches, 8);  // 384 / (1 · 48)
  const Measurement fresh = *run.estimate(alone);
  // Twice the micro-batches of one sequence: about twice the time, the same activations.
  EXPECT_GT(fresh.step_latency_s, 1.6 * before.step_latency_s);
  EXPECT_NEAR(fresh.peak_memory_bytes[0], before.peak_memory_bytes[0],
              1e-9 * before.peak_memory_bytes[0]);
}

}  // namespace
}  // namespace shardgym
