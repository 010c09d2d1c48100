#include "agents/ppo_net.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/live/tp/gemm.h"

namespace shardgym::ppo_detail {
namespace {

torch::nn::Linear layer(int in, int out, double gain) {
  torch::nn::Linear l(in, out);
  torch::NoGradGuard no_grad;
  torch::nn::init::orthogonal_(l->weight, gain);
  torch::nn::init::constant_(l->bias, 0.0);
  return l;
}

// l(x) with the product through oneDNN's sgemm when available (runtime/live/tp/gemm.h):
// Debian's LibTorch otherwise runs it on the reference BLAS, several times slower.
torch::Tensor dense(const torch::nn::Linear& l, const torch::Tensor& x) {
  return live::linear_matmul(x, l->weight.t()) + l->bias;
}

}  // namespace

PolicyNetImpl::PolicyNetImpl(int blocks_, int catalog_, int block_features_, int globals_,
                             int hidden_, bool keep_, int moves_)
    : blocks(blocks_),
      catalog(catalog_),
      block_features(block_features_),
      globals(globals_),
      hidden(hidden_),
      keep(keep_),
      moves(moves_) {
  const int in = block_features + 3 + globals;
  enc1 = register_module("enc1", layer(in, hidden, std::sqrt(2.0)));
  enc2 = register_module("enc2", layer(hidden, hidden, std::sqrt(2.0)));
  pi = register_module("pi", layer(hidden, catalog, 0.01));
  v1 = register_module("v1", layer(hidden + globals, hidden, std::sqrt(2.0)));
  v2 = register_module("v2", layer(hidden, 1, 1.0));
  if (moves > 0) pi_pp = register_module("pi_pp", layer(hidden + globals, moves, 0.01));
  torch::Tensor extra = torch::zeros({blocks, 3});
  for (int b = 0; b < blocks; ++b) {
    extra[b][b % 2] = 1.0;
    extra[b][2] = static_cast<double>(b) / blocks;
  }
  block_extra = register_buffer("block_extra", extra);
  block_kind = register_buffer("block_kind", torch::arange(blocks, torch::kLong).remainder(2));
  if (keep) keep_bias = register_parameter("keep_bias", torch::zeros({moves > 0 ? 3 : 2}));
}

std::pair<torch::Tensor, torch::Tensor> PolicyNetImpl::forward(const torch::Tensor& obs,
                                                               const torch::Tensor& mask,
                                                               bool with_keep) {
  const int64_t n = obs.size(0);
  torch::Tensor x = obs.narrow(1, 0, static_cast<int64_t>(blocks) * block_features)
                        .reshape({n, blocks, block_features});
  torch::Tensor g = obs.narrow(1, static_cast<int64_t>(blocks) * block_features, globals);
  torch::Tensor in = torch::cat({x, block_extra.unsqueeze(0).expand({n, blocks, 3}),
                                 g.unsqueeze(1).expand({n, blocks, globals})},
                                2);
  torch::Tensor h = torch::tanh(dense(enc2, torch::tanh(dense(enc1, in))));
  torch::Tensor logits = dense(pi, h);
  if (keep && with_keep) {
    torch::Tensor current =
        (x.select(2, 0) * catalog).round().clamp(0, catalog - 1).to(torch::kLong);  // [N, B]
    torch::Tensor onehot = torch::one_hot(current, catalog).to(torch::kFloat32);
    logits = logits + onehot * keep_bias.index_select(0, block_kind).view({1, blocks, 1});
  }
  torch::Tensor pooled = torch::cat({h.mean(1), g}, 1);
  if (moves > 0) {
    const int width = std::max(catalog, moves);
    torch::Tensor pp = dense(pi_pp, pooled);  // [N, M]
    if (keep && with_keep) {
      torch::Tensor bonus = torch::zeros({moves});
      bonus[0] = 1.0;
      pp = pp + bonus.unsqueeze(0) * keep_bias[2];
    }
    logits = torch::constant_pad_nd(logits, {0, width - catalog});
    pp = torch::constant_pad_nd(pp, {0, width - moves}).unsqueeze(1);
    logits = torch::cat({logits, pp}, 1);  // [N, B+1, W]
  }
  logits = logits.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
  torch::Tensor value = dense(v2, torch::tanh(dense(v1, pooled))).squeeze(1);
  return {logits, value};
}

PlanDistribution distribution(const torch::Tensor& masked_logits, const torch::Tensor& mask) {
  return {torch::log_softmax(masked_logits, 2), mask};
}

torch::Tensor PlanDistribution::block_log_prob(const torch::Tensor& actions) const {
  return log_probs.gather(2, actions.unsqueeze(2)).squeeze(2);
}

torch::Tensor PlanDistribution::log_prob(const torch::Tensor& actions) const {
  return block_log_prob(actions).sum(1);
}

torch::Tensor PlanDistribution::entropy() const {
  // Masked entries have p = 0 and log p = −inf. Zero log p there *before* multiplying: a
  // where() after the product would still send 0·(−inf) = NaN into the gradient.
  torch::Tensor safe = torch::where(mask, log_probs, torch::zeros_like(log_probs));
  return -(log_probs.exp() * safe).sum({1, 2});
}

torch::Tensor PlanDistribution::sample(at::Generator& gen) const {
  const int64_t n = log_probs.size(0), b = log_probs.size(1), k = log_probs.size(2);
  torch::Tensor probs = log_probs.exp().reshape({n * b, k});
  return at::multinomial(probs, 1, /*replacement=*/false, gen).reshape({n, b});
}

torch::Tensor PlanDistribution::mode() const { return log_probs.argmax(2); }

}  // namespace shardgym::ppo_detail
