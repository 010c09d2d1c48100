// linear_matmul / batched_matmul (runtime/live/tp/gemm.h): float32 through oneDNN agrees with
// a float64 at::matmul forward and backward, for contiguous operands and for the strided views
// the attention passes (transposes, selects); every other dtype is at::matmul bit for bit.
#include "runtime/live/tp/gemm.h"

#include <functional>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

namespace shardgym::live {
namespace {

using Product = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

// float32 sums of K ≤ 96 products of O(1) terms: ~1e-7 relative each, 1e-5 leaves margin.
constexpr double kTolFloat = 1e-5;

double rel_err(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).norm() / want.norm()).item<double>();
}

// Output and both input gradients (through the `make` views) against float64 at::matmul.
void expect_matches_reference(const Product& product, const at::Tensor& a64, const at::Tensor& b64,
                              const std::function<at::Tensor(const at::Tensor&)>& view_a,
                              const std::function<at::Tensor(const at::Tensor&)>& view_b,
                              const std::string& what) {
  at::Tensor a = a64.to(at::kFloat).requires_grad_(true);
  at::Tensor b = b64.to(at::kFloat).requires_grad_(true);
  at::Tensor ra = a64.clone().requires_grad_(true), rb = b64.clone().requires_grad_(true);
  at::Tensor y = product(view_a(a), view_b(b));
  at::Tensor ry = at::matmul(view_a(ra), view_b(rb));
  ASSERT_EQ(y.sizes(), ry.sizes()) << what;
  EXPECT_EQ(y.scalar_type(), at::kFloat) << what;
  EXPECT_LT(rel_err(y.detach(), ry.detach()), kTolFloat) << what << ": output";
  at::Tensor dy = at::randn(ry.sizes(), at::kDouble);
  auto g = torch::autograd::grad({y}, {a, b}, {dy.to(at::kFloat)});
  auto rg = torch::autograd::grad({ry}, {ra, rb}, {dy});
  EXPECT_LT(rel_err(g[0], rg[0]), kTolFloat) << what << ": gradient of a";
  EXPECT_LT(rel_err(g[1], rg[1]), kTolFloat) << what << ": gradient of b";
}

at::Tensor same(const at::Tensor& t) { return t; }

TEST(Gemm, OneDnnIsUsedWhereLibTorchHasIt) {
  std::printf("at::hasMKLDNN() = %d, oneDNN sgemm found = %d\n", at::hasMKLDNN(),
              onednn_gemm_available());
  if (at::hasMKLDNN()) {
    EXPECT_TRUE(onednn_gemm_available()) << "LibTorch has oneDNN";
  }
}

TEST(Gemm, LinearMatchesMatmulForwardAndBackward) {
  at::manual_seed(1);
  expect_matches_reference(linear_matmul, at::randn({4, 8, 24}, at::kDouble),
                           at::randn({24, 40}, at::kDouble), same, same, "[4,8,24]·[24,40]");
  expect_matches_reference(linear_matmul, at::randn({7, 1}, at::kDouble),
                           at::randn({1, 5}, at::kDouble), same, same, "K = 1");
  // A transposed weight and a non-contiguous input, read in place.
  expect_matches_reference(
      linear_matmul, at::randn({3, 24, 8}, at::kDouble), at::randn({40, 24}, at::kDouble),
      [](const at::Tensor& t) { return t.transpose(1, 2); },
      [](const at::Tensor& t) { return t.t(); }, "transposed views");
}

TEST(Gemm, BatchedMatchesMatmulOnAttentionViews) {
  at::manual_seed(2);
  // As in tp_attention.cpp: q, k, v are selects of a [B, S, heads, 3, d] view, transposed.
  const int64_t B = 2, S = 6, H = 3, d = 4;
  const at::Tensor qkv = at::randn({B, S, H, 3, d}, at::kDouble);
  auto q = [](const at::Tensor& t) { return t.select(3, 0).transpose(1, 2); };
  auto kt = [](const at::Tensor& t) { return t.select(3, 1).transpose(1, 2).transpose(-2, -1); };
  expect_matches_reference(batched_matmul, qkv, qkv, q, kt, "q·kᵀ");
  expect_matches_reference(
      batched_matmul, at::randn({B, H, S, S}, at::kDouble), qkv, same,
      [](const at::Tensor& t) { return t.select(3, 2).transpose(1, 2); }, "att·v");
  expect_matches_reference(batched_matmul, at::randn({5, 1, 9}, at::kDouble),
                           at::randn({5, 9, 1}, at::kDouble), same, same, "M = N = 1");
}

TEST(Gemm, Float64IsAtMatmulBitForBit) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({4, 8, 24}, at::kDouble), w = at::randn({24, 40}, at::kDouble);
  EXPECT_TRUE(at::equal(linear_matmul(x, w), at::matmul(x, w)));
  const at::Tensor a = at::randn({2, 3, 5, 6}, at::kDouble),
                   b = at::randn({2, 3, 6, 7}, at::kDouble);
  EXPECT_TRUE(at::equal(batched_matmul(a, b), at::matmul(a, b)));
}

}  // namespace
}  // namespace shardgym::live
