#include "agents/ppo_net.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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
                             int hidden_, bool keep_, int moves_, double plan_p, int tail)
    : blocks(blocks_),
      catalog(catalog_),
      block_features(block_features_),
      globals(globals_),
      hidden(hidden_),
      keep(keep_),
      moves(moves_),
      plan(plan_p > 0) {
  const int in = block_features + 3 + globals;
  enc1 = register_module("enc1", layer(in, hidden, std::sqrt(2.0)));
  enc2 = register_module("enc2", layer(hidden, hidden, std::sqrt(2.0)));
  pi = register_module("pi", layer(hidden, catalog, 0.01));
  v1 = register_module("v1", layer(hidden + globals, hidden, std::sqrt(2.0)));
  v2 = register_module("v2", layer(hidden, 1, 1.0));
  if (moves > 0) pi_pp = register_module("pi_pp", layer(hidden + globals, moves, 0.01));
  if (plan) {
    // The conditions among the globals (partition_env.h): phase, sequence factor, compute
    // slowdown and the link classes' bandwidths; not the step, nor what depends on the plan
    // in force (peak memory, latency, the pipeline part).
    std::vector<int64_t> cond = {1, 2, 3};
    for (int i = 6; i < globals - (tail < 0 ? moves : tail); ++i) cond.push_back(i);
    plan_conditions = register_buffer("plan_conditions", torch::tensor(cond, torch::kLong));
    pi_plan = register_module("pi_plan", layer(static_cast<int>(cond.size()), 2 * catalog, 0.01));
    plan_move = register_buffer("plan_move", torch::tensor({static_cast<float>(std::log1p(-plan_p)),
                                                            static_cast<float>(std::log(plan_p))}));
  }
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
  const int width = std::max({catalog, moves, plan ? 2 : 0});
  if (width > catalog) logits = torch::constant_pad_nd(logits, {0, width - catalog});
  std::vector<torch::Tensor> rows = {logits};  // [N, B, W], then one [N, 1, W] per extra row
  auto row = [&](torch::Tensor r) {
    rows.push_back(torch::constant_pad_nd(r, {0, width - r.size(1)}).unsqueeze(1));
  };
  if (moves > 0) {
    torch::Tensor pp = dense(pi_pp, pooled);  // [N, M]
    if (keep && with_keep) {
      torch::Tensor bonus = torch::zeros({moves});
      bonus[0] = 1.0;
      pp = pp + bonus.unsqueeze(0) * keep_bias[2];
    }
    row(pp);
  }
  if (plan) {
    torch::Tensor pl = dense(pi_plan, g.index_select(1, plan_conditions));  // [N, 2K]
    row(plan_move.unsqueeze(0).expand({n, 2}));  // fixed: no gradient, log-ratio 0
    row(pl.narrow(1, 0, catalog));
    row(pl.narrow(1, catalog, catalog));
  }
  if (rows.size() > 1) logits = torch::cat(rows, 1);  // [N, R, W]
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
