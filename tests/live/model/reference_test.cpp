// The single-rank reference GPT and the AdamW it trains with: parameter counts agree with
// runtime/core, the model is causal, and our AdamW + global-norm clipping reproduces
// torch::optim::AdamW + torch::nn::utils::clip_grad_norm_ step for step.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/live/tp/reference_gpt.h"
#include "tests/live/model/model_test_util.h"

namespace shardgym::live {
namespace {

using testing::perturbed_params;
using testing::random_batch;
using testing::tiny_model;

TEST(ReferenceGpt, ParameterCountsMatchTheModelSpec) {
  const ModelSpec m = tiny_model();
  const ParamMap p = init_gpt_params(m, at::kDouble, 1);
  int64_t blocks = 0, outer = 0;
  for (const auto& [name, t] : p) (name.rfind("h.", 0) == 0 ? blocks : outer) += t.numel();
  int64_t want_blocks = 0;
  for (int b = 0; b < m.num_blocks(); ++b) want_blocks += m.block_params(b);
  EXPECT_EQ(blocks, want_blocks);
  EXPECT_EQ(outer, m.embedding_params());
}

TEST(ReferenceGpt, InitialLossIsNearUniformAndInitIsSeeded) {
  const ModelSpec m = tiny_model();
  ReferenceGpt a(m, init_gpt_params(m, at::kDouble, 7));
  ReferenceGpt b(m, init_gpt_params(m, at::kDouble, 7));
  ReferenceGpt c(m, init_gpt_params(m, at::kDouble, 8));
  const auto batch = random_batch(m, 4, 3);
  const double la = a.loss(batch.tokens, batch.targets).item<double>();
  // Small initial weights give near-uniform predictions: loss ≈ ln(V) within a few percent.
  EXPECT_NEAR(la, std::log(double(m.vocab)), 0.05 * std::log(double(m.vocab)));
  EXPECT_EQ(la, b.loss(batch.tokens, batch.targets).item<double>());
  EXPECT_NE(la, c.loss(batch.tokens, batch.targets).item<double>());
}

TEST(ReferenceGpt, PositionsDoNotSeeTheFuture) {
  const ModelSpec m = tiny_model();
  ReferenceGpt gpt(m, perturbed_params(m, at::kDouble, 2));
  auto batch = random_batch(m, 2, 5);
  // The loss of the first 4 positions must not change when later tokens change.
  at::Tensor t2 = batch.tokens.clone();
  t2.narrow(1, 4, 4).fill_(0);
  at::Tensor tg = batch.targets.clone();
  tg.narrow(1, 4, 4).fill_(-100);  // ignored positions
  const double l1 = gpt.loss(batch.tokens, tg).item<double>();
  const double l2 = gpt.loss(t2, tg).item<double>();
  EXPECT_DOUBLE_EQ(l1, l2);
}

TEST(AdamW, MatchesTorchOptimAdamWWithClipping) {
  const ModelSpec m = tiny_model();
  const ParamMap init = perturbed_params(m, at::kDouble, 4);
  const double lr = 1e-2, wd = 0.1, clip = 0.3;
  ReferenceTrainer ours(m, init, AdamWOptions{lr, 0.9, 0.999, 1e-8, wd}, clip);

  ReferenceGpt theirs(m, init);
  std::vector<at::Tensor> decay, no_decay;
  for (const ParamShard& s : full_param_specs(m))
    (s.decay ? decay : no_decay).push_back(theirs.params().at(s.name));
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(lr).weight_decay(wd)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(lr).weight_decay(0)));
  torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(lr));
  std::vector<at::Tensor> all = decay;
  all.insert(all.end(), no_decay.begin(), no_decay.end());

  bool clipped = false;
  for (int step = 0; step < 4; ++step) {
    const auto batch = random_batch(m, 8, 100 + step);
    const double l_ours = ours.train_step(batch.tokens, batch.targets);
    opt.zero_grad();
    at::Tensor l = theirs.loss(batch.tokens, batch.targets);
    l.backward();
    clipped |= torch::nn::utils::clip_grad_norm_(all, clip) > clip;
    opt.step();
    EXPECT_NEAR(l_ours, l.item<double>(), 1e-12) << "step " << step;
  }
  EXPECT_TRUE(clipped) << "the clip threshold should bite in this test";
  std::string worst;
  // float64, same operation order up to the norm's summation order: 1e-10 relative.
  EXPECT_LT(testing::max_rel_err(ours.gpt().params(), theirs.params(), &worst), 1e-10) << worst;
}

}  // namespace
}  // namespace shardgym::live
