#include "runtime/live/tp/tp_mlp.h"

#include <ATen/ATen.h>

#include "runtime/live/tp/gemm.h"
#include "runtime/live/tp/mappings.h"

namespace shardgym::live {

at::Tensor mlp_core(const BlockContext& ctx, const at::Tensor& n,
                    const std::vector<at::Tensor>& params) {
  Comm& g2 = *ctx.g2;
  const at::Tensor &w1 = params[2], &b1 = params[3], &w2 = params[4];
  at::Tensor z = reduce_from_group(linear_matmul(n, w1), g2) + b1;  // [B, S, f/n1]
  z = copy_to_group(at::gelu(z), g2);
  return linear_matmul(z, w2);  // [B, S, h/n2] partial over G1
}

}  // namespace shardgym::live
