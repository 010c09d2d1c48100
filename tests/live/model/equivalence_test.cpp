// Equivalence of the tensor-parallel ranks with the single-rank reference GPT: for every
// strategy of the catalog (uniform plans), strategies outside it (tp2d with a mesh axis of 1),
// and random per-block mixtures, on P ∈ {1, 2, 4} thread-ranks over Gloo, the global loss and
// every gathered parameter gradient equal the reference's, from the same initial weights.
#include <mutex>

#include <gtest/gtest.h>

#include "runtime/live/launch.h"
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
  const ModelSpec m = tiny_model();
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble, uniform_cases(m, GetParam()));
}

TEST_P(Equivalence, RandomMixturesAcrossBlocksMatchTheReferenceInFloat64) {
  const ModelSpec m = tiny_model();
  expect_equivalent(m, GetParam(), at::kDouble, kTolDouble,
                    mixture_cases(m, GetParam(), 8, 100 + GetParam()));
}

// float32 takes the oneDNN products (gemm.h) and, for chunks=k, the overlapped schedule.
TEST_P(Equivalence, EveryCatalogStrategyMatchesTheReferenceInFloat32) {
  const ModelSpec m = tiny_model();
  expect_equivalent(m, GetParam(), at::kFloat, kTolFloat, uniform_cases(m, GetParam()));
}

TEST_P(Equivalence, MixturesMatchTheReferenceInFloat32) {
  const ModelSpec m = tiny_model();
  expect_equivalent(m, GetParam(), at::kFloat, kTolFloat,
                    mixture_cases(m, GetParam(), 3, 200 + GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Equivalence, ::testing::Values(1, 2, 4));

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
