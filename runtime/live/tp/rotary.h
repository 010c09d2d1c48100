// Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer"), as Llama applies them to the
// queries and keys of every head (docs/design.md §3 "Model shapes"). Shared by the reference
// model and the TP ranks: both rotate the same way, on the whole sequence (the attention core
// sees every position under sp and 2D alike).
#pragma once

#include <ATen/Tensor.h>

namespace shardgym::live {

// Llama 3's rope_theta (its params.json and config.json: 500000; Llama 2 used 10000).
constexpr double kRopeTheta = 500000.0;

// x [..., S, d] (d even) at positions 0..S-1: the rotate-half convention (Hugging Face's
// Llama, GPT-NeoX), pairing features i and i + d/2 with frequency θ^(-2i/d):
//   y = x·cos(pθ_i) + rotate_half(x)·sin(pθ_i),  rotate_half([a, b]) = [-b, a].
// The angles are computed in float64 and cast to x's dtype. Differentiable.
at::Tensor apply_rotary(const at::Tensor& x);

}  // namespace shardgym::live
