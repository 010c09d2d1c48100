// Equivalence of the tensor-parallel ranks with the single-rank reference GPT: for every
// strategy of the catalog (uniform plans), strategies outside it (tp2d with a mesh axis of 1),
// and random per-block mixtures, on P ∈ {1, 2, 4} thread-ranks over Gloo, the global loss and
// every gathered parameter gradient equal the reference's, from the same initial weights;
// also with the batch run as m ∈ {2, 4} micro-batches (gradient accumulation).
#include <cmath>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_trainer.h"
#include "tests/live/model/equivalence_util.h"

namespace shardgym::live {
namespace {

using testing::degenerate_mesh_cases;
using testing::expect_equivalent;
using testing::kTimeout;
using testing::kTolDouble;
using testing::kTolFloat;
using testing::mixture_cases;
using testing::perturbed_params;
using testing::random_batch;
using testing::tiny_model;
using testing::uniform_cases;

class Equivalence : public ::testing::TestWithParam<int> {};

TEST_P(Equivalence, EveryCatalogStrategyMatchesTheReferenceInFloat64) {
  testing::expect_catalog_equivalent(GetParam(), at::kDouble, kTolDouble);
}

TEST_P(Equivalence, RandomMixturesAcrossBlocksMatchTheReferenceInFloat64) {
  testing::expect_mixtures_equivalent(GetParam(), at::kDouble, kTolDouble, 8, 100 + GetParam());
}

// float32 takes the oneDNN products (gemm.h) and, for chunks=k, the overlapped schedule.
TEST_P(Equivalence, EveryCatalogStrategyMatchesTheReferenceInFloat32) {
  testing::expect_catalog_equivalent(GetParam(), at::kFloat, kTolFloat);
}

TEST_P(Equivalence, MixturesMatchTheReferenceInFloat32) {
  testing::expect_mixtures_equivalent(GetParam(), at::kFloat, kTolFloat, 3, 200 + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ranks, Equivalence, ::testing::Values(1, 2, 4));

// Llama's blocks (tiny_llama: grouped-query attention of 4 groups × 3 heads, rotary, RMSNorm,
// SwiGLU, no biases) under every catalog strategy, the degenerate meshes and random mixtures
// (these with the LM head tied to wte), float64 and float32.
class LlamaEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(LlamaEquivalence, EveryCatalogStrategyMatchesTheReferenceInFloat64) {
  const ModelSpec m = testing::tiny_llama();
  const auto cases = uniform_cases(m, GetParam());
  if (GetParam() == 4) {
    const std::set<std::string> all = {"dp",       "tp1d",     "sp",    "tp2d-row",
                                       "tp2d-col", "chunks", "recompute"};
    EXPECT_EQ(testing::covered_kinds(cases), all);
  }
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble, cases);
}

TEST_P(LlamaEquivalence, TiedMixturesAndDegenerateMeshesMatchTheReferenceInFloat64) {
  const ModelSpec m = testing::tiny_llama(/*tied=*/true);
  auto cases = mixture_cases(m, GetParam(), 8, 300 + GetParam());
  if (GetParam() > 1)
    for (const auto& c : degenerate_mesh_cases(m, GetParam())) cases.push_back(c);
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble, cases);
}

TEST_P(LlamaEquivalence, EveryCatalogStrategyMatchesTheReferenceInFloat32) {
  const ModelSpec m = testing::tiny_llama();
  expect_equivalent(m, GetParam(), at::kFloat, kTolFloat, uniform_cases(m, GetParam()));
}

// Gradient accumulation over 2 micro-batches (global batch 16), every strategy kind at P = 4.
TEST_P(LlamaEquivalence, MicroBatchesMatchTheReferenceInFloat64) {
  const int world = GetParam();
  ModelSpec m = testing::tiny_llama();
  m.global_batch = m.micro_batch = 16;
  auto cases = testing::with_micro_batches(uniform_cases(m, world), 2, world, m.global_batch);
  expect_equivalent(m, world, at::kDouble, kTolDouble, cases);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LlamaEquivalence, ::testing::Values(1, 2, 4));

// Collectives that work on a copy and write the result back (as CUDA tensors over Gloo do,
// staged through the host): the write-back must stay out of autograd's history, or the
// overlapped chunks (chunks = 2) lose the gradient of everything before their all-reduce.
class StagedEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(StagedEquivalence, EveryStrategyAndMixturesMatchTheReferenceThroughCopyingComms) {
  const ModelSpec m = tiny_model();
  testing::RunOn staged;
  staged.stage_copies = true;
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble, uniform_cases(m, GetParam()), staged);
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble,
                    mixture_cases(m, GetParam(), 6, 600 + GetParam()), staged);
}

INSTANTIATE_TEST_SUITE_P(Ranks, StagedEquivalence, ::testing::Values(2, 4));

class MeshEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(MeshEquivalence, DegenerateMeshesMatchTheReferenceInFloat64) {
  const ModelSpec m = tiny_model();
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble, degenerate_mesh_cases(m, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, MeshEquivalence, ::testing::Values(2, 4));  // a mesh needs P ≥ 2

// Gradient accumulation: the batch as m micro-batches gives the same loss and gradients.
// A global batch of 16 lets P = 4 take m = 4 (4 rows per rank); m leaves out only the plans
// whose chunks cannot split a micro-batch (with_micro_batches), and at P = 4 every strategy
// kind is still there.
// micro_batch = G: the model itself asks for no micro-batching; m is what each step passes.
ModelSpec micro_model() {
  ModelSpec m = tiny_model();
  m.global_batch = 16;
  m.micro_batch = 16;
  return m;
}

std::vector<testing::Case> micro_cases(const std::vector<testing::Case>& cases, int world, int mb) {
  const auto out = testing::with_micro_batches(cases, mb, world, micro_model().global_batch);
  EXPECT_TRUE(cases.empty() || !out.empty()) << "P=" << world << " m=" << mb;
  return out;
}

class MicroBatchEquivalence : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(MicroBatchEquivalence, EveryCatalogStrategyMatchesTheReferenceInFloat64) {
  const auto [world, mb] = GetParam();
  const ModelSpec m = micro_model();
  auto cases = micro_cases(uniform_cases(m, world), world, mb);
  for (auto& c : micro_cases(degenerate_mesh_cases(m, world), world, mb)) cases.push_back(c);
  if (world == 4) {
    const std::set<std::string> all = {"dp",     "tp1d",      "sp",       "tp2d-row",
                                       "tp2d-col", "chunks", "recompute"};
    EXPECT_EQ(testing::covered_kinds(cases), all);
  }
  expect_equivalent(m, world, at::kDouble, kTolDouble, cases);
}

TEST_P(MicroBatchEquivalence, RandomMixturesAcrossBlocksMatchTheReferenceInFloat64) {
  const auto [world, mb] = GetParam();
  const ModelSpec m = micro_model();
  expect_equivalent(m, world, at::kDouble, kTolDouble,
                    micro_cases(mixture_cases(m, world, 6, 700 + world), world, mb));
}

TEST_P(MicroBatchEquivalence, EveryCatalogStrategyMatchesTheReferenceInFloat32) {
  const auto [world, mb] = GetParam();
  const ModelSpec m = micro_model();
  expect_equivalent(m, world, at::kFloat, kTolFloat,
                    micro_cases(uniform_cases(m, world), world, mb));
}

INSTANTIATE_TEST_SUITE_P(RanksAndMicroBatches, MicroBatchEquivalence,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(2, 4)));

// The equivalence above would also hold if m were ignored; the collectives show that it is
// not. On P = 4 under tp1d(t=2), rank q's tensor group {2⌊q/2⌋, 2⌊q/2⌋+1} runs the layers'
// all-reduces once per micro-batch, while its data group {q mod 2, q mod 2 + 2} carries only
// the gradient sums: once per iteration whatever m. Block times are filled for every m.
TEST(MicroBatches, LayerCollectivesRunPerMicroBatchAndTheGradientSyncOncePerIteration) {
  const ModelSpec m = micro_model();
  const Plan plan = Plan::parse("uniform:tp1d(t=2)", m.num_blocks());
  const auto batch = random_batch(m, m.global_batch, 31);
  std::mutex mu;
  std::vector<std::vector<int>> tensor_calls(4), data_calls(4);
  bool timed = true;
  run_threads(4, [&](CommWorld& w) {
    RankTrainer tr(m, plan, w, {0, at::kDouble});
    const int q = w.rank();
    Comm& tensor = w.group({2 * (q / 2), 2 * (q / 2) + 1});
    Comm& data = w.group({q % 2, q % 2 + 2});
    std::vector<int> tc, dc;
    bool ok = true;
    for (int mb : {1, 2, 4}) {
      const int t0 = tensor.stats().calls, d0 = data.stats().calls;
      BlockTimes times;
      tr.forward_backward(batch.tokens, batch.targets, &times, mb);
      tc.push_back(tensor.stats().calls - t0);
      dc.push_back(data.stats().calls - d0);
      ok = ok && times.fwd_s.size() == size_t(m.num_blocks()) &&
           times.bwd_s.size() == size_t(m.num_blocks());
      for (size_t b = 0; ok && b < times.fwd_s.size(); ++b)
        ok = times.fwd_s[b] > 0 && times.bwd_s[b] > 0 && times.comm_s[b] >= 0;
    }
    std::lock_guard<std::mutex> lock(mu);
    tensor_calls[q] = tc;
    data_calls[q] = dc;
    timed = timed && ok;
  }, kTimeout);
  for (int q = 0; q < 4; ++q) {
    ASSERT_EQ(tensor_calls[q].size(), 3u);
    EXPECT_GT(tensor_calls[q][0], 0) << "rank " << q;
    EXPECT_EQ(tensor_calls[q][1], 2 * tensor_calls[q][0]) << "rank " << q << ", m = 2";
    EXPECT_EQ(tensor_calls[q][2], 4 * tensor_calls[q][0]) << "rank " << q << ", m = 4";
    EXPECT_GT(data_calls[q][0], 0) << "rank " << q;
    EXPECT_EQ(data_calls[q][1], data_calls[q][0]) << "rank " << q << ", m = 2";
    EXPECT_EQ(data_calls[q][2], data_calls[q][0]) << "rank " << q << ", m = 4";
  }
  EXPECT_TRUE(timed);
}

// An m that does not divide a local batch is refused with m and that batch in the message,
// on every rank and before any collective: the trainer then steps normally.
TEST(MicroBatches, AnMThatDoesNotSplitTheLocalBatchIsRejectedWithItsNumbers) {
  const ModelSpec m = micro_model();  // G = 16: 4 rows per rank on P = 4
  const int blocks = m.num_blocks();
  const Plan tp = Plan::parse("uniform:tp1d(t=2)", blocks);
  EXPECT_EQ(why_micro_batches_invalid(m, tp, 4, 16, 4), "");
  EXPECT_EQ(why_micro_batches_invalid(m, tp, 4, 16, 0), "micro_batches = 0: must be at least 1");
  // Block 0 first: its tensor-parallel group's local batch is 16 / 2 replicas = 8.
  EXPECT_EQ(why_micro_batches_invalid(m, tp, 4, 16, 3),
            "micro_batches = 3 does not divide the local batch of 8 sequences of block 0 "
            "(tp1d(t=2)) (global batch 16 over 2 replicas)");
  // Every block takes m = 8 (8 rows per replica), the embedding's 4 rows per rank do not.
  EXPECT_NE(why_micro_batches_invalid(m, tp, 4, 16, 8)
                .find("micro_batches = 8 does not divide the local batch of 4 sequences of each "
                      "rank's embedding and LM head"),
            std::string::npos);
  // dp with chunks = 2: m = 4 leaves 1 row per rank and micro-batch, not 2 chunks.
  const Plan chunky = Plan::parse("dp;tp1d(t=2);dp(chunks=2);dp", blocks);
  EXPECT_EQ(why_micro_batches_invalid(m, chunky, 4, 16, 2), "");
  EXPECT_NE(why_micro_batches_invalid(m, chunky, 4, 16, 4).find("block 2 (dp(chunks=2)) takes 1 "),
            std::string::npos)
      << why_micro_batches_invalid(m, chunky, 4, 16, 4);

  std::mutex mu;
  std::vector<std::string> errors(4);
  std::vector<double> after(4, 0);
  const auto batch = random_batch(m, m.global_batch, 32);
  run_threads(4, [&](CommWorld& w) {
    RankTrainer tr(m, tp, w, {0, at::kDouble});
    const std::string error = testing::train_step_error(tr, batch, 3);
    const double loss = tr.train_step(batch.tokens, batch.targets, nullptr, 2);
    std::lock_guard<std::mutex> lock(mu);
    errors[w.rank()] = error;
    after[w.rank()] = loss;
  }, kTimeout);
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(errors[q], "rank " + std::to_string(q) +
                             ": micro_batches = 3 does not divide the local batch of 8 "
                             "sequences of block 0 (tp1d(t=2)) (global batch 16 over 2 replicas)");
    EXPECT_TRUE(std::isfinite(after[q]) && after[q] > 0) << "rank " << q;
  }
}

// ATP with d2 = 1 is Megatron 1D: not just close, the same floating-point operations.
TEST(Equivalence, Tp2dWithD2OfOneIsBitwiseMegatron1D) {
  const ModelSpec m = tiny_model();
  const ParamMap init = perturbed_params(m, at::kDouble, 5);
  const auto batch = random_batch(m, m.global_batch, 6);
  std::mutex mu;
  bool same = true;
  run_threads(4, [&](CommWorld& w) {
    RankTrainer a(m, Plan::parse("uniform:tp1d(t=4)", m.num_blocks()), w, {0, at::kDouble});
    RankTrainer b(m, Plan::parse("uniform:tp2d(d1=4,d2=1,first=row)", m.num_blocks()), w,
                  {0, at::kDouble});
    a.load_full_params(init);
    b.load_full_params(init);
    const double la = a.forward_backward(batch.tokens, batch.targets);
    const double lb = b.forward_backward(batch.tokens, batch.targets);
    const auto ga = a.gather_full_grads(), gb = b.gather_full_grads();
    bool eq = la == lb;
    for (const auto& [name, g] : ga) eq = eq && at::equal(g, gb.at(name));
    std::lock_guard<std::mutex> lock(mu);
    same = same && eq;
  }, kTimeout);
  EXPECT_TRUE(same);
}

}  // namespace
}  // namespace shardgym::live
