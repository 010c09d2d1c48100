// Pipeline stages on live ranks (runtime/live/tp/pipeline.cpp) against the single-rank
// reference GPT: for p = 2 and 4 stages, m = 1, 2 and 4 micro-batches, GPipe and 1F1B, with
// tensor parallelism inside stages and data parallelism across replicas of the pipeline, the
// loss and every gathered gradient equal the reference's from the same weights. Training
// through boundary moves (a layer handed to the next stage, with its AdamW moments, and the
// blocks' layouts changed in the same repartition) keeps every loss the reference's.
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_trainer.h"
#include "runtime/live/tp/reference_gpt.h"
#include "tests/live/model/equivalence_util.h"

namespace shardgym::live {
namespace {

using testing::Case;
using testing::expect_equivalent;
using testing::kTolDouble;
using testing::kTolFloat;

using testing::four_layers;
using testing::pipelined_cases;

const std::vector<std::string> kTwoStages = {"pp(p=2)", "pp(p=2,schedule=gpipe)",
                                             "pp(p=2,split=1/3)", "pp(p=2,split=3/1,schedule=gpipe)"};
const std::vector<std::string> kFourStages = {"pp(p=4)", "pp(p=4,schedule=gpipe)"};

// Every block data-parallel inside the stages of each pipeline part of `parts`, on `world` ranks.
void expect_dp_stages_equivalent(int world, const std::vector<std::string>& parts) {
  const ModelSpec m = four_layers();
  expect_equivalent(m, world, at::kDouble, kTolDouble, pipelined_cases(m, "uniform:dp", parts));
}

TEST(PipelineEquivalence, TwoStagesOnTwoRanksMatchTheReference) {
  expect_dp_stages_equivalent(2, kTwoStages);
}

// P = 4, p = 2: two ranks per stage, each block split over them (tp1d, sp, tp2d, chunks,
// recompute) or replicated (dp: data parallelism across the pipeline's two replicas).
TEST(PipelineEquivalence, TensorParallelismInsideStagesAndDataParallelismAcross) {
  const ModelSpec m = four_layers();
  std::vector<Case> cases;
  for (const char* blocks :
       {"uniform:dp", "uniform:tp1d(t=2)", "uniform:tp1d(t=2,sp=1)",
        "dp;tp1d(t=2);tp2d(d1=1,d2=2,first=row);tp1d(t=2,sp=1,recompute=1);"
        "tp1d(t=2,chunks=2);dp;tp2d(d1=2,d2=1,first=col);tp1d(t=2)"})
    for (const Case& c : pipelined_cases(m, blocks, kTwoStages)) cases.push_back(c);
  expect_equivalent(m, 4, at::kDouble, kTolDouble, cases);
}

TEST(PipelineEquivalence, FourStagesOnFourRanksMatchTheReference) {
  expect_dp_stages_equivalent(4, kFourStages);
}

// float32 takes the oneDNN products and the overlapped chunks.
TEST(PipelineEquivalence, Float32MatchesTheReference) {
  const ModelSpec m = four_layers();
  expect_equivalent(m, 4, at::kFloat, kTolFloat,
                    pipelined_cases(m, "uniform:tp1d(t=2,chunks=2)", {"pp(p=2)"}));
}

// Llama's blocks with the LM head tied to wte: the first and the last stage both hold wte, and
// its gradient is summed between them (Megatron-LM's embedding all-reduce).
TEST(PipelineEquivalence, TiedLlamaMatchesTheReference) {
  const ModelSpec m = four_layers(testing::tiny_llama(/*tied=*/true));
  std::vector<Case> cases =
      pipelined_cases(m, "uniform:tp1d(t=2)", {"pp(p=2)", "pp(p=2,split=3/1)"});
  for (const Case& c : pipelined_cases(m, "uniform:dp", {"pp(p=4)"})) cases.push_back(c);
  expect_equivalent(m, 4, at::kDouble, kTolDouble, cases);
}

TEST(PipelinePlans, LiveRanksRefuseWhatTheyDoNotRun) {
  const ModelSpec m = four_layers();
  const auto why = [&](const std::string& text) {
    return why_live_plan_invalid(m, Plan::parse(text, m.num_blocks()), 4);
  };
  EXPECT_EQ(why("uniform:dp@pp(p=2,m=4)"), "");
  EXPECT_NE(why("uniform:dp@pp(p=2,m=4,schedule=interleaved,v=2)").find("interleaved"),
            std::string::npos);
  EXPECT_NE(why("uniform:dp@pp(p=2)@dp(w=1/2)").find("data shares"), std::string::npos);
  EXPECT_NE(why("uniform:dp@pp(p=8)").find("p=8"), std::string::npos);
  // A stage's micro-batch splits over its own ranks: 8 sequences, 2 ranks a stage, m = 8 leaves
  // half a sequence per rank.
  const Plan two = Plan::parse("uniform:dp@pp(p=2)", m.num_blocks());
  EXPECT_EQ(why_micro_batches_invalid(m, two, 4, 8, 4), "");
  EXPECT_NE(why_micro_batches_invalid(m, two, 4, 8, 8).find("global batch 8 over 2 replicas"),
            std::string::npos)
      << why_micro_batches_invalid(m, two, 4, 8, 8);
}

TrainerOptions training_options() {
  TrainerOptions o;
  o.dtype = at::kDouble;
  o.lr = 1e-2;
  o.clip = 0.5;  // below this model's gradient norm: clipping is active
  return o;
}

// Eight AdamW steps of 2 micro-batches: a boundary move after step 3 (stage 0 hands a layer
// to stage 1, and the blocks change layouts in the same repartition), another after step 6
// (back, with 1F1B → GPipe). Every loss is the reference trainer's, and so are the weights and
// AdamW moments after the last step.
TEST(PipelineTraining, BoundaryMovesKeepTrainingTheReferenceModel) {
  const ModelSpec m = four_layers();
  const int world = 4, iters = 8;
  const int nb = m.num_blocks();
  const Plan p0 = Plan::parse("uniform:tp1d(t=2)@pp(p=2,split=3/1)", nb);
  const Plan p1 = Plan::parse(
      "dp;tp1d(t=2,sp=1);tp2d(d1=1,d2=2,first=row);tp1d(t=2);dp;dp;tp1d(t=2);tp1d(t=2,chunks=2)"
      "@pp(p=2)", nb);
  const Plan p2 = Plan::parse("uniform:dp@pp(p=2,split=1/3,schedule=gpipe)", nb);
  for (const Plan* p : {&p0, &p1, &p2}) ASSERT_EQ(why_live_plan_invalid(m, *p, world), "");
  const ParamMap init = testing::perturbed_params(m, at::kDouble, 31);
  std::vector<testing::Batch> batches;
  for (int i = 0; i < iters; ++i) batches.push_back(testing::random_batch(m, m.global_batch, 400 + i));
  const TrainerOptions o = training_options();
  ReferenceTrainer ref(m, init, AdamWOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}, o.clip);
  std::vector<double> want;
  for (const auto& b : batches) want.push_back(ref.train_step(b.tokens, b.targets));

  std::mutex mu;
  std::vector<double> got(iters, 0);
  std::vector<double> received(world, 0);
  double param_err = 1, moment_err = 1;
  WorldOptions wo;
  wo.timeout_s = testing::kTimeout;
  run_threads(world, [&](CommWorld& w) {
    RankTrainer tr(m, p0, w, o);
    tr.load_full_params(init);
    double moved = 0;
    for (int i = 0; i < iters; ++i) {
      if (i == 3) moved += tr.repartition(p1).bytes_received;
      if (i == 6) moved += tr.repartition(p2).bytes_received;
      const double loss = tr.train_step(batches[i].tokens, batches[i].targets, nullptr, 2);
      if (w.rank() == 0) got[i] = loss;
    }
    const ParamMap params = tr.gather_full_params();
    const ParamMap moments = tr.gather_full_optimizer_state("exp_avg");
    std::lock_guard<std::mutex> lock(mu);
    received[w.rank()] = moved;
    if (w.rank() == 0) {
      std::string worst;
      ParamMap want_moments;
      for (const auto& [name, state] : ref.state()) want_moments[name] = state.exp_avg;
      param_err = testing::max_rel_err(params, ref.gpt().params(), &worst);
      moment_err = testing::max_rel_err(moments, want_moments, &worst);
    }
  }, wo);
  for (int i = 0; i < iters; ++i)
    EXPECT_NEAR(got[i], want[i], kTolDouble * std::abs(want[i])) << "step " << i;
  EXPECT_LT(param_err, kTolDouble);
  EXPECT_LT(moment_err, kTolDouble);
  // Every rank takes part in the moves: stage 1's ranks receive the moved layer's tensors.
  for (int q = 2; q < world; ++q) EXPECT_GT(received[q], 0) << "rank " << q;
}

}  // namespace
}  // namespace shardgym::live
