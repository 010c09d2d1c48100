#include "runtime/live/tp/tp_attention.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "runtime/live/tp/gemm.h"
#include "runtime/live/tp/mappings.h"

namespace shardgym::live {

at::Tensor attention_core(const BlockContext& ctx, const at::Tensor& n,
                          const std::vector<at::Tensor>& params) {
  const BlockPlacement& pl = ctx.place;
  Comm& g2 = *ctx.g2;
  const int64_t h = ctx.model.hidden, d = h / ctx.model.heads;
  const at::Tensor &w = params[2], &b = params[3], &a = params[4];
  // This rank's heads, from its QKV box (3h/n1 columns, split n2 ways by the reduce-scatter):
  // heads/t for an even split, its own count for an uneven tp1d one (strategy.h heads=).
  const int64_t heads = w.size(1) / (3 * d * pl.n2);

  // [B, S, 3h/n1] partial over G2 -> this rank's heads [B, S, 3h/t].
  at::Tensor qkv = reduce_scatter_to_group(linear_matmul(n, w), g2, 2) + b;
  const int64_t B = qkv.size(0), S = qkv.size(1);
  qkv = qkv.view({B, S, heads, 3, d});
  at::Tensor q = qkv.select(3, 0).transpose(1, 2);  // [B, heads, S, d]
  at::Tensor k = qkv.select(3, 1).transpose(1, 2);
  at::Tensor v = qkv.select(3, 2).transpose(1, 2);
  const at::Tensor mask = at::ones({S, S}, n.options().dtype(at::kBool)).triu(1);
  at::Tensor att = batched_matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  att = at::softmax(att.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
  at::Tensor o = batched_matmul(att, v).transpose(1, 2).reshape({B, S, heads * d});
  o = gather_to_parallel(o, g2, 2);  // heads of G1 block i1: rows i1 of A
  return linear_matmul(o, a);        // [B, S, h/n2] partial over G1
}

}  // namespace shardgym::live
