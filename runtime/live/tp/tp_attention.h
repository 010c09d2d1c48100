// Tensor-parallel causal self-attention block (pre-LN, with its residual), every strategy.
//
// Full block: Y = X + Attn(LN(X)), QKV = LN(X)·W + b (W[h,3h], head-major columns),
// O = softmax(QKᵀ/√d + causal)·V per head, out = O·A + c (A[h,h]).
//
// Megatron 1D (tp1d(t), group G1 of t ranks; Shoeybi et al. 2019):
//   W = [W_1 … W_t] by columns (heads), A = [A_1; …; A_t] by rows.
//   Rank j: QKV_j = f(LN(X))·W_j + b_j (its a/t heads), O_j = Attn(QKV_j),
//   out = g(O_j·A_j) + c. f: identity fwd / all-reduce bwd; g: all-reduce fwd / identity bwd.
// + sequence parallelism (sp=1): X arrives as the rank's S/t sequence slice; LN runs on it;
//   f becomes all-gather(seq) fwd / reduce-scatter bwd, g becomes reduce-scatter(seq) fwd /
//   all-gather bwd (Korthikanti et al. 2022).
// ATP 2D (tp2d(d1,d2); Cheng et al. 2023, reconstructed from the authors' public code):
//   X arrives as hidden slice i2 of n2 (replicated over G1); W is blocked W_{i2,i1}
//   [h/n2, 3h/n1], A is blocked A_{i1,i2} [h/n1, h/n2].
//   P = f_G1(LN_G2(X_i2))·W_{i2,i1}                 partial over G2
//   QKV = reduce-scatter_G2(P) (heads) + b           heads block i1·n2+i2 of t, bwd all-gather
//   O = Attn(QKV); O' = all-gather_G2(O) (heads)     heads block i1 of n1, bwd reduce-scatter
//   out_i2 = g_G1(O'·A_{i1,i2}) + c_i2               hidden slice i2, replicated over G1.
//   d2 = 1 is exactly Megatron 1D; dp (t = 1) is the reference computation.
#pragma once

#include <vector>

#include <ATen/Tensor.h>

#include "runtime/live/tp/tp_common.h"

namespace shardgym::live {

// Grouped-query attention and rotary positions (Llama's traits, model_spec.h): QKV's columns
// are laid out by query group (placement.cpp block_tensor_specs: each group's heads/kv_heads
// query heads, then its K head, then its V head), so every split above, which is a contiguous
// range of whole groups, keeps each query head with its K and V. Each query head attends with
// its group's K and V; Q and K are rotated (rotary.h) on the whole sequence before QKᵀ.
// Without a GEMM bias (linear_bias = false) b and c are left out.

// One rank's QKV [B, S, groups·(heads/kv_heads + 2)·d] by query group: q [B, groups,
// per·S, d] (the group's per = heads/kv_heads query heads' rows stacked, so that one product
// per group scores them all against the group's K without copying K or V), k and v
// [B, groups, S, d]; Q and K rotated when the model is rotary. Without GQA (per = 1) these
// are views of qkv as before: [B, heads, S, d].
struct QkvGroups {
  at::Tensor q, k, v;
};
QkvGroups split_qkv(const ModelSpec& m, const at::Tensor& qkv);

// The block between its G1 mappings (block_forward in tp_block.h adds LN, f, g and the
// residual): n = f_G1(LN(X)) as this rank sees it -> O'·A, partial over G1 [B, S, h/n2].
// params in block_param_shards order (ln.weight, ln.bias, qkv.weight, qkv.bias, proj.weight,
// proj.bias, less those the model has not: block_tensors in tp_common.h).
at::Tensor attention_core(const BlockContext& ctx, const at::Tensor& n,
                          const std::vector<at::Tensor>& params);

}  // namespace shardgym::live
