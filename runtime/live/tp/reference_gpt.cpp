#include "runtime/live/tp/reference_gpt.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>

#include "runtime/live/tp/rotary.h"
#include "runtime/live/tp/tp_common.h"

namespace shardgym::live {

ReferenceGpt::ReferenceGpt(const ModelSpec& model, const ParamMap& params) : model_(model) {
  check_full_params(model, params);
  for (const auto& [name, t] : params) params_[name] = t.detach().clone().set_requires_grad(true);
}

namespace {

// The norm of a block or the final one: LayerNorm, or RMSNorm (weight only) for Llama.
at::Tensor block_norm(const ModelSpec& m, const at::Tensor& x, const at::Tensor& w,
                      const at::Tensor& b) {
  return m.rmsnorm ? rms_norm(x, w) : at::layer_norm(x, {m.hidden}, w, b, 1e-5);
}

}  // namespace

at::Tensor ReferenceGpt::q(const std::string& name) const {
  auto it = params_.find(name);
  return it == params_.end() ? at::Tensor() : it->second;
}

at::Tensor ReferenceGpt::attention(const std::string& a, const at::Tensor& x) const {
  const int64_t B = x.size(0), S = x.size(1), h = model_.hidden, d = model_.head_dim();
  const int64_t groups = model_.kv_head_count(), per = model_.heads / groups;
  at::Tensor n = block_norm(model_, x, p(a + "ln.weight"), q(a + "ln.bias"));
  // Query-group order (gpt_params.h): per group its `per` query heads, then K, then V.
  at::Tensor qkv = add_bias(at::matmul(n, p(a + "qkv.weight")), q(a + "qkv.bias"))
                       .view({B, S, groups, per + 2, d})
                       .permute({0, 2, 3, 1, 4});  // [B, groups, per + 2, S, d]
  at::Tensor qs = qkv.narrow(2, 0, per);           // [B, groups, per, S, d]
  at::Tensor k = qkv.narrow(2, per, 1);            // [B, groups, 1, S, d]: shared by the group
  at::Tensor v = qkv.narrow(2, per + 1, 1);
  if (model_.rotary) {
    qs = apply_rotary(qs);
    k = apply_rotary(k);
  }
  const at::Tensor mask = at::ones({S, S}, at::kBool).triu(1);
  at::Tensor att = at::matmul(qs, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  att = at::softmax(att.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
  at::Tensor o = at::matmul(att, v).permute({0, 3, 1, 2, 4}).reshape({B, S, h});
  return add_bias(at::matmul(o, p(a + "proj.weight")), q(a + "proj.bias"));
}

at::Tensor ReferenceGpt::mlp(const std::string& m, const at::Tensor& x) const {
  at::Tensor n = block_norm(model_, x, p(m + "ln.weight"), q(m + "ln.bias"));
  at::Tensor z = add_bias(at::matmul(n, p(m + "fc1.weight")), q(m + "fc1.bias"));
  if (model_.swiglu) {
    z = z.view({x.size(0), x.size(1), model_.ffn_size(), 2});  // gate 2j, up 2j + 1
    z = at::silu(z.select(-1, 0)) * z.select(-1, 1);
  } else {
    z = at::gelu(z);
  }
  return add_bias(at::matmul(z, p(m + "fc2.weight")), q(m + "fc2.bias"));
}

at::Tensor ReferenceGpt::loss(const at::Tensor& tokens, const at::Tensor& targets) const {
  const int64_t B = tokens.size(0), S = tokens.size(1);
  at::Tensor x = at::embedding(p("wte"), tokens);
  if (!model_.rotary) x = x + p("wpe").narrow(0, 0, S).unsqueeze(0);
  for (int i = 0; i < model_.layers; ++i) {
    x = x + attention("h." + std::to_string(i) + ".attn.", x);
    x = x + mlp("h." + std::to_string(i) + ".mlp.", x);
  }
  x = block_norm(model_, x, p("ln_f.weight"), q("ln_f.bias"));
  at::Tensor logits = at::matmul(x, model_.tied_embeddings ? p("wte").t() : p("lm_head.weight"));
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
