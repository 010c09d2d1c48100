#include "runtime/live/tp/tp_mlp.h"

#include <ATen/ATen.h>

#include "runtime/live/tp/gemm.h"
#include "runtime/live/tp/mappings.h"

namespace shardgym::live {

at::Tensor mlp_activation(const ModelSpec& m, const at::Tensor& z) {
  return m.swiglu ? swiglu(z) : at::gelu(z);  // swiglu: column 2j gate, 2j + 1 up
}

at::Tensor mlp_core(const BlockContext& ctx, const at::Tensor& n,
                    const std::vector<at::Tensor>& params) {
  Comm& g2 = *ctx.g2;
  const BlockTensors t = block_tensors(ctx.model, params);
  // [B, S, f₁/n1], f₁ = f or 2f (SwiGLU's gates and ups)
  at::Tensor z = add_bias(reduce_from_group(linear_matmul(n, t.in_weight), g2), t.in_bias);
  z = copy_to_group(mlp_activation(ctx.model, z), g2);  // [B, S, f/n1]
  return linear_matmul(z, t.out_weight);                // [B, S, h/n2] partial over G1
}

}  // namespace shardgym::live
