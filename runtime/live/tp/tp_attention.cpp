#include "runtime/live/tp/tp_attention.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "runtime/live/tp/gemm.h"
#include "runtime/live/tp/mappings.h"
#include "runtime/live/tp/rotary.h"

namespace shardgym::live {

QkvGroups split_qkv(const ModelSpec& m, const at::Tensor& qkv) {
  const int64_t d = m.head_dim(), per = m.heads / m.kv_head_count();
  const int64_t B = qkv.size(0), S = qkv.size(1);
  const int64_t groups = qkv.size(2) / ((per + 2) * d);
  // [B, groups, per + 2, S, d]: each group's query heads, then its K and its V.
  const at::Tensor g = qkv.view({B, S, groups, per + 2, d}).permute({0, 2, 3, 1, 4});
  QkvGroups out;
  out.q = g.narrow(2, 0, per);  // [B, groups, per, S, d]
  out.k = g.select(2, per);     // [B, groups, S, d]
  out.v = g.select(2, per + 1);
  if (m.rotary) {
    out.q = apply_rotary(out.q);
    out.k = apply_rotary(out.k);
  }
  out.q = out.q.reshape({B, groups, per * S, d});  // a view without GQA (per = 1)
  return out;
}

at::Tensor attention_core(const BlockContext& ctx, const at::Tensor& n,
                          const std::vector<at::Tensor>& params) {
  Comm& g2 = *ctx.g2;
  const ModelSpec& m = ctx.model;
  const BlockTensors t = block_tensors(m, params);
  const int64_t d = m.head_dim(), per = m.heads / m.kv_head_count();
  // This rank's query groups, from its QKV box (qkv_width/n1 columns, split n2 ways by the
  // reduce-scatter, whole groups: placement.cpp head_range): kv_heads/t groups for an even
  // split, its own for an uneven tp1d one (strategy.h heads=).

  // [B, S, q/n1] partial over G2 -> this rank's groups [B, S, q/t].
  at::Tensor qkv = reduce_scatter_to_group(linear_matmul(n, t.in_weight), g2, 2);
  qkv = add_bias(qkv, t.in_bias);
  const int64_t B = qkv.size(0), S = qkv.size(1);
  const QkvGroups h = split_qkv(m, qkv);
  const int64_t groups = h.k.size(1);
  // Causal within each query head: row r of the stacked [per·S] rows is position r mod S.
  at::Tensor mask = at::ones({S, S}, n.options().dtype(at::kBool)).triu(1);
  if (per > 1) mask = mask.repeat({per, 1});
  at::Tensor att = batched_matmul(h.q, h.k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  att = at::softmax(att.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
  at::Tensor o = batched_matmul(att, h.v)  // [B, groups, per·S, d] -> [B, S, heads·d]
                     .unflatten(2, {per, S})
                     .permute({0, 3, 1, 2, 4})
                     .reshape({B, S, groups * per * d});
  o = gather_to_parallel(o, g2, 2);       // heads of G1 block i1: rows i1 of A
  return linear_matmul(o, t.out_weight);  // [B, S, h/n2] partial over G1
}

}  // namespace shardgym::live
