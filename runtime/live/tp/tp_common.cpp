#include "runtime/live/tp/tp_common.h"

#include <ATen/ATen.h>

#include "runtime/live/tp/mappings.h"

namespace shardgym::live {

at::Tensor group_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            Comm& g2, int64_t full_hidden) {
  constexpr double kEps = 1e-5;  // as at::layer_norm in the reference
  if (g2.size() == 1) return at::layer_norm(x, {x.size(-1)}, weight, bias, kEps);
  const double inv_h = 1.0 / static_cast<double>(full_hidden);
  at::Tensor mean = sum_over_group(x.sum(-1, true), g2) * inv_h;
  at::Tensor xc = x - mean;
  at::Tensor var = sum_over_group((xc * xc).sum(-1, true), g2) * inv_h;
  return xc * at::rsqrt(var + kEps) * weight + bias;
}

}  // namespace shardgym::live
