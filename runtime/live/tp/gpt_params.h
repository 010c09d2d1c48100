// The GPT's parameters by full name, shared by the reference model and the TP ranks.
//
// Names and shapes (h hidden, f ffn, V vocab, S seq; matrices are A[in, out], Y = X·A + b):
//   wte[V,h] wpe[S,h]
//   h.<i>.attn.ln.{weight,bias}[h]  h.<i>.attn.qkv.weight[h,3h]  h.<i>.attn.qkv.bias[3h]
//   h.<i>.attn.proj.weight[h,h]     h.<i>.attn.proj.bias[h]
//   h.<i>.mlp.ln.{weight,bias}[h]   h.<i>.mlp.fc1.weight[h,f] h.<i>.mlp.fc1.bias[f]
//   h.<i>.mlp.fc2.weight[f,h]       h.<i>.mlp.fc2.bias[h]
//   ln_f.{weight,bias}[h]  lm_head.weight[h,V]   (LM head untied from wte)
// QKV columns are head-major: column c belongs to head c / (3·d), to q, k or v by
// (c / d) % 3, and to feature c % d, where d = h / heads. A head split is then a contiguous
// column slice, which keeps every TP shard an axis-aligned box (runtime/core/placement.h).
//
// Llama's traits (model_spec.h; placement.cpp block_tensor_specs fixes the layout) change
// the set: rmsnorm drops every ln.bias and ln_f.bias, linear_bias = false the GEMMs' biases,
// rotary drops wpe, tied_embeddings drops lm_head.weight (the head is wteᵀ). With kv_heads
// (grouped-query attention) qkv.weight is [h, h + 2·kv·d] in query-group order: per group of
// heads/kv query heads, those heads' q columns, then the group's k, then its v, each d wide
// (kv = heads is the layout above). With swiglu fc1.weight is [h, 2f] with FFN column j's
// gate in column 2j and its up in 2j + 1 (interleaved), so any contiguous even column range
// holds matching gates and ups; fc2 stays [f, h].
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "runtime/core/model_spec.h"
#include "runtime/core/placement.h"

namespace shardgym::live {

using ParamMap = std::map<std::string, at::Tensor>;

// Every parameter with its full shape (box = whole tensor), in a fixed order: wte, wpe, the
// blocks in order, ln_f, lm_head.
std::vector<ParamShard> full_param_specs(const ModelSpec& m);

// Deterministic initial weights: matrices N(0, 0.02²) (output projections scaled by
// 1/sqrt(2·layers), as GPT-2), biases 0, LayerNorm and RMSNorm weights 1. Drawn in float64
// from one generator seeded by `seed` in full_param_specs order, then cast, so float32 and
// float64 runs start from the same values.
ParamMap init_gpt_params(const ModelSpec& m, at::ScalarType dtype, uint64_t seed);

// Checks names and shapes; throws std::invalid_argument naming the first mismatch.
void check_full_params(const ModelSpec& m, const ParamMap& params);

}  // namespace shardgym::live
