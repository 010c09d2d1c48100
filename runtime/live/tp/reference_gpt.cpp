#include "runtime/live/tp/reference_gpt.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>

namespace shardgym::live {

ReferenceGpt::ReferenceGpt(const ModelSpec& model, const ParamMap& params) : model_(model) {
  check_full_params(model, params);
  for (const auto& [name, t] : params) params_[name] = t.detach().clone().set_requires_grad(true);
}

at::Tensor ReferenceGpt::loss(const at::Tensor& tokens, const at::Tensor& targets) const {
  const int64_t B = tokens.size(0), S = tokens.size(1), h = model_.hidden;
  const int64_t heads = model_.heads, d = h / heads;
  at::Tensor x = at::embedding(p("wte"), tokens) + p("wpe").narrow(0, 0, S).unsqueeze(0);
  const at::Tensor mask = at::ones({S, S}, at::kBool).triu(1);
  for (int i = 0; i < model_.layers; ++i) {
    const std::string a = "h." + std::to_string(i) + ".attn.";
    at::Tensor n = at::layer_norm(x, {h}, p(a + "ln.weight"), p(a + "ln.bias"), 1e-5);
    at::Tensor qkv = (at::matmul(n, p(a + "qkv.weight")) + p(a + "qkv.bias"))
                         .view({B, S, heads, 3, d});
    at::Tensor q = qkv.select(3, 0).transpose(1, 2);  // [B, heads, S, d]
    at::Tensor k = qkv.select(3, 1).transpose(1, 2);
    at::Tensor v = qkv.select(3, 2).transpose(1, 2);
    at::Tensor att = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    att = at::softmax(att.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
    at::Tensor o = at::matmul(att, v).transpose(1, 2).reshape({B, S, h});
    x = x + at::matmul(o, p(a + "proj.weight")) + p(a + "proj.bias");
    const std::string m = "h." + std::to_string(i) + ".mlp.";
    n = at::layer_norm(x, {h}, p(m + "ln.weight"), p(m + "ln.bias"), 1e-5);
    at::Tensor z = at::gelu(at::matmul(n, p(m + "fc1.weight")) + p(m + "fc1.bias"));
    x = x + at::matmul(z, p(m + "fc2.weight")) + p(m + "fc2.bias");
  }
  x = at::layer_norm(x, {h}, p("ln_f.weight"), p("ln_f.bias"), 1e-5);
  at::Tensor logits = at::matmul(x, p("lm_head.weight"));
  return at::cross_entropy_loss(logits.reshape({B * S, model_.vocab}), targets.reshape({B * S}));
}

ParamMap ReferenceGpt::grads() const {
  ParamMap g;
  for (const auto& [name, t] : params_)
    g[name] = t.grad().defined() ? t.grad().clone() : at::zeros_like(t);
  return g;
}

void ReferenceGpt::zero_grads() {
  for (auto& [name, t] : params_)
    if (t.grad().defined()) t.mutable_grad() = at::Tensor();
}

ReferenceTrainer::ReferenceTrainer(const ModelSpec& model, const ParamMap& params,
                                   AdamWOptions adamw, double clip)
    : gpt_(model, params), adamw_(adamw), clip_(clip) {
  for (const ParamShard& s : full_param_specs(model)) {
    state_[s.name] = adamw_init(gpt_.params().at(s.name));
    decay_[s.name] = s.decay;
  }
}

double ReferenceTrainer::train_step(const at::Tensor& tokens, const at::Tensor& targets) {
  gpt_.zero_grads();
  at::Tensor loss = gpt_.loss(tokens, targets);
  loss.backward();
  const ParamMap grads = gpt_.grads();
  double sq = 0;
  for (const auto& [name, g] : grads) sq += g.pow(2).sum().item<double>();
  const double scale = clip_coefficient(std::sqrt(sq), clip_);
  for (auto& [name, t] : gpt_.params())
    adamw_update(t, grads.at(name), state_.at(name), adamw_, decay_.at(name), scale);
  return loss.item<double>();
}

}  // namespace shardgym::live
