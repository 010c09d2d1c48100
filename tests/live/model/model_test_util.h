// Shared by the live-model tests: a tiny GPT, perturbed initial weights, a random batch and
// relative errors between maps of tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "runtime/core/model_spec.h"
#include "runtime/live/tp/gpt_params.h"

namespace shardgym::live::testing {

// Small enough for milliseconds per step, big enough for every strategy of P ≤ 4:
// heads, hidden, ffn and seq divisible by 4; batch 8 = 4 replicas × 2 chunks.
inline ModelSpec tiny_model() {
  ModelSpec m = ModelSpec::gpt(/*layers=*/2, /*hidden=*/16, /*heads=*/4, /*seq=*/8,
                               /*micro_batch=*/2, /*global_batch=*/8);
  m.name = "tiny";
  m.ffn = 32;
  m.vocab = 32;
  m.dtype = DType::kFloat64;
  m.mixed_precision = false;
  return m;
}

// The same scale with Llama's blocks (model_spec.h set_llama_traits): grouped-query attention
// with 4 groups of 3 query heads (head_dim 4, so rotary has 2 frequency pairs), SwiGLU of
// ffn 72 (not 4·hidden), RMSNorm, rotary, no biases. Every catalog degree of P ≤ 4 divides the
// 4 groups, and ffn splits by the 12 heads (uneven splits).
inline ModelSpec tiny_llama(bool tied = false) {
  ModelSpec m = tiny_model();
  m.name = "tiny-llama";
  m.set_llama_traits();
  m.hidden = 48;
  m.heads = 12;
  m.kv_heads = 4;
  m.ffn = 72;
  m.tied_embeddings = tied;
  return m;
}

// Initial weights with every LayerNorm and bias away from 1 / 0, so that each parameter has a
// gradient path that a wrong partition would change.
inline ParamMap perturbed_params(const ModelSpec& m, at::ScalarType dtype, uint64_t seed) {
  ParamMap p = init_gpt_params(m, at::kDouble, seed);
  at::Generator gen = at::detail::createCPUGenerator(seed + 1000);
  for (auto& [name, t] : p) {
    at::Tensor noise = at::empty(t.sizes(), at::kDouble);
    noise.normal_(0.0, 0.1, gen);
    if (t.dim() == 1) t = t + noise;
    t = t.to(dtype);
  }
  return p;
}

struct Batch {
  at::Tensor tokens, targets;
};

inline Batch random_batch(const ModelSpec& m, int64_t global_batch, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.tokens = at::randint(m.vocab, {global_batch, m.seq}, gen, at::kLong);
  b.targets = at::randint(m.vocab, {global_batch, m.seq}, gen, at::kLong);
  return b;
}

inline double rel_err(const at::Tensor& got, const at::Tensor& want) {
  const double denom = want.to(at::kDouble).norm().item<double>();
  const double diff = (got.to(at::kDouble) - want.to(at::kDouble)).norm().item<double>();
  return denom > 0 ? diff / denom : diff;
}

// Largest relative error over the names of `want`; `worst` gets the name (or "missing").
inline double max_rel_err(const ParamMap& got, const ParamMap& want, std::string* worst) {
  double e = 0;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    const double ei = it == got.end() || it->second.sizes() != w.sizes()
                          ? INFINITY
                          : rel_err(it->second, w);
    if (ei > e || std::isnan(ei)) {
      e = std::isnan(ei) ? INFINITY : ei;
      if (worst) *worst = name;
    }
  }
  return e;
}

}  // namespace shardgym::live::testing
