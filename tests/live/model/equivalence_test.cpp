// Equivalence of the tensor-parallel ranks with the single-rank reference GPT: for every
// strategy of the catalog (uniform plans), strategies outside it (tp2d with a mesh axis of 1),
// and random per-block mixtures, on P ∈ {1, 2, 4} thread-ranks over Gloo, the global loss and
// every gathered parameter gradient equal the reference's, from the same initial weights.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <random>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/live/launch.h"
#include "runtime/live/tp/rank_trainer.h"
#include "runtime/live/tp/reference_gpt.h"
#include "tests/live/model/model_test_util.h"

namespace shardgym::live {
namespace {

using testing::max_rel_err;
using testing::perturbed_params;
using testing::random_batch;
using testing::tiny_model;

constexpr double kTimeout = 120;
// float64: the partitioned sums differ from the reference only in summation order, ~1e-15
// relative per operation; 1e-9 leaves room for the depth of the network and nothing more.
constexpr double kTolDouble = 1e-9;
// float32: ~1e-7 per operation, accumulated over two layers and the loss.
constexpr double kTolFloat = 1e-5;

struct Case {
  std::string name;
  Plan plan;
};

struct Outcome {
  double loss_err = 0, grad_err = 0;
  std::string worst;
};

std::vector<Case> uniform_cases(const ModelSpec& m, int world) {
  StrategyCatalog cat(m, world);
  std::vector<Case> out;
  for (int i = 0; i < cat.size(); ++i)
    if (cat.shape_mask(BlockKind::kAttention)[i] && cat.shape_mask(BlockKind::kMlp)[i])
      out.push_back({"uniform:" + cat.at(i).to_string(), Plan::uniform(cat.at(i), m.num_blocks())});
  return out;
}

// ATP meshes with one axis of size 1 (outside the catalog): d2 = 1 is Megatron 1D, d1 = 1
// splits only the hidden dimension.
std::vector<Case> degenerate_mesh_cases(const ModelSpec& m, int world) {
  std::vector<Case> out;
  for (int t = 2; t <= world; t *= 2)
    for (const char* first : {"row", "col"})
      for (auto [d1, d2] : {std::pair<int, int>{t, 1}, {1, t}}) {
        const std::string s = "tp2d(d1=" + std::to_string(d1) + ",d2=" + std::to_string(d2) +
                              ",first=" + first + ")";
        out.push_back({"uniform:" + s, Plan::parse("uniform:" + s, m.num_blocks())});
      }
  return out;
}

std::vector<Case> mixture_cases(const ModelSpec& m, int world, int n, uint32_t seed) {
  StrategyCatalog cat(m, world);
  std::mt19937 rng(seed);
  std::vector<Case> out;
  for (int k = 0; k < n; ++k) {
    Plan plan;
    for (int b = 0; b < m.num_blocks(); ++b) {
      const auto& mask = cat.shape_mask(ModelSpec::block_kind(b));
      std::vector<int> valid;
      for (int i = 0; i < cat.size(); ++i)
        if (mask[i]) valid.push_back(i);
      plan.blocks.push_back(cat.at(valid[rng() % valid.size()]));
    }
    out.push_back({"mixture:" + plan.to_string(), plan});
  }
  return out;
}

std::vector<Outcome> run_cases(const ModelSpec& m, int world, at::ScalarType dtype,
                               const std::vector<Case>& cases) {
  const ParamMap init = perturbed_params(m, dtype, 11);
  const auto batch = random_batch(m, m.global_batch, 12);
  ReferenceGpt ref(m, perturbed_params(m, at::kDouble, 11));
  at::Tensor ref_loss = ref.loss(batch.tokens, batch.targets);
  ref_loss.backward();
  const ParamMap ref_grads = ref.grads();
  const double want_loss = ref_loss.item<double>();

  std::vector<Outcome> out(cases.size());
  std::mutex mu;
  run_threads(world, [&](CommWorld& w) {
    TrainerOptions o;
    o.dtype = dtype;
    for (size_t c = 0; c < cases.size(); ++c) {
      RankTrainer tr(m, cases[c].plan, w, o);
      tr.load_full_params(init);
      const double loss = tr.forward_backward(batch.tokens, batch.targets);
      const ParamMap grads = tr.gather_full_grads();
      Outcome got;
      got.loss_err = std::abs(loss - want_loss) / std::abs(want_loss);
      got.grad_err = max_rel_err(grads, ref_grads, &got.worst);
      std::lock_guard<std::mutex> lock(mu);
      if (got.loss_err > out[c].loss_err) out[c].loss_err = got.loss_err;
      if (got.grad_err >= out[c].grad_err) out[c] = Outcome{out[c].loss_err, got.grad_err, got.worst};
    }
  }, kTimeout);
  return out;
}

void expect_equivalent(const ModelSpec& m, int world, at::ScalarType dtype, double tol,
                       const std::vector<Case>& cases) {
  const auto out = run_cases(m, world, dtype, cases);
  double loss_max = 0, grad_max = 0;
  for (const auto& o : out) {
    loss_max = std::max(loss_max, o.loss_err);
    grad_max = std::max(grad_max, o.grad_err);
  }
  std::printf("P=%d %s: %zu plans, max relative error: loss %.2e, gradients %.2e\n", world,
              dtype == at::kDouble ? "float64" : "float32", cases.size(), loss_max, grad_max);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_LE(out[c].loss_err, tol) << "P=" << world << " " << cases[c].name << ": loss";
    EXPECT_LE(out[c].grad_err, tol) << "P=" << world << " " << cases[c].name << ": gradient of "
                                    << out[c].worst;
  }
}

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
