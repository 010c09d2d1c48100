// ReferenceGpt: the unpartitioned single-rank GPT in plain LibTorch, the ground truth the
// tensor-parallel ranks are tested against (same parameter names and shapes, gpt_params.h).
//
// Pre-LN decoder: x = wte[tokens] + wpe; per layer x += Attn(LN(x)), x += MLP(LN(x)) with
// causal multi-head attention and an exact-erf GELU MLP; logits = LN_f(x)·lm_head; the loss is
// the mean token cross-entropy over the whole batch [G, S].
// Llama's traits (model_spec.h, gpt_params.h for the layout): RMSNorm for every LayerNorm,
// rotary Q and K instead of wpe (rotary.h), grouped-query attention (each query head with its
// group's K and V), SwiGLU (SiLU(gate)·up) for GELU, no GEMM biases, LM head = wteᵀ when tied.
// ReferenceTrainer adds AdamW with global-norm clipping (adamw.h) on the full tensors.
#pragma once

#include <cstdint>

#include <ATen/Tensor.h>

#include "runtime/core/model_spec.h"
#include "runtime/live/tp/adamw.h"
#include "runtime/live/tp/gpt_params.h"

namespace shardgym::live {

class ReferenceGpt {
 public:
  // Copies `params` (checked against the model) into leaves that require grad.
  ReferenceGpt(const ModelSpec& model, const ParamMap& params);

  // tokens, targets: int64 [G, S]. Mean cross-entropy, differentiable.
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets) const;

  const ModelSpec& model() const { return model_; }
  ParamMap& params() { return params_; }
  const ParamMap& params() const { return params_; }
  // Gradients after a backward (zeros where none reached).
  ParamMap grads() const;
  void zero_grads();

 private:
  at::Tensor p(const std::string& name) const { return params_.at(name); }
  // The parameter, or an undefined tensor where the model has none (biases, ln_f.bias).
  at::Tensor q(const std::string& name) const;
  // One block's output to add to the residual x (prefix "h.<i>.attn." / "h.<i>.mlp.").
  at::Tensor attention(const std::string& prefix, const at::Tensor& x) const;
  at::Tensor mlp(const std::string& prefix, const at::Tensor& x) const;
  ModelSpec model_;
  ParamMap params_;
};

class ReferenceTrainer {
 public:
  ReferenceTrainer(const ModelSpec& model, const ParamMap& params, AdamWOptions adamw,
                   double clip);
  // Forward, backward, clip, AdamW; returns the loss before the update.
  double train_step(const at::Tensor& tokens, const at::Tensor& targets);
  ReferenceGpt& gpt() { return gpt_; }
  const std::map<std::string, AdamWState>& state() const { return state_; }

 private:
  ReferenceGpt gpt_;
  AdamWOptions adamw_;
  double clip_;
  std::map<std::string, AdamWState> state_;
  std::map<std::string, bool> decay_;
};

}  // namespace shardgym::live
