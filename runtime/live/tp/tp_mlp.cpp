#include "runtime/live/tp/tp_mlp.h"

#include <ATen/ATen.h>

#include "runtime/live/tp/mappings.h"

namespace shardgym::live {

at::Tensor mlp_forward(const BlockContext& ctx, const at::Tensor& x,
                       const std::vector<at::Tensor>& params) {
  const BlockPlacement& pl = ctx.place;
  Comm& g1 = *ctx.g1;
  Comm& g2 = *ctx.g2;
  const at::Tensor &ln_w = params[0], &ln_b = params[1], &w1 = params[2], &b1 = params[3],
                   &w2 = params[4], &b2 = params[5];

  at::Tensor n = group_layer_norm(x, ln_w, ln_b, g2, ctx.model.hidden);
  n = pl.sp ? gather_to_parallel(n, g1, 1) : copy_to_group(n, g1);
  at::Tensor z = reduce_from_group(at::matmul(n, w1), g2) + b1;  // [B, S, f/n1]
  z = copy_to_group(at::gelu(z), g2);
  at::Tensor y = at::matmul(z, w2);  // [B, S, h/n2] partial over G1
  y = pl.sp ? reduce_scatter_to_group(y, g1, 1) : reduce_from_group(y, g1);
  return x + y + b2;
}

}  // namespace shardgym::live
