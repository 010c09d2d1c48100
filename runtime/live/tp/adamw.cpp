#include "runtime/live/tp/adamw.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace shardgym::live {

AdamWState adamw_init(const at::Tensor& param) {
  AdamWState s;
  s.exp_avg = at::zeros_like(param);
  s.exp_avg_sq = at::zeros_like(param);
  return s;
}

void adamw_update(const at::Tensor& param, const at::Tensor& grad, AdamWState& state,
                  const AdamWOptions& o, bool decay, double grad_scale) {
  c10::NoGradGuard no_grad;
  at::Tensor p = param;  // shares storage: updates land in the parameter
  at::Tensor g = grad_scale == 1.0 ? grad : grad * grad_scale;
  state.step += 1;
  if (decay && o.weight_decay != 0) p.mul_(1 - o.lr * o.weight_decay);
  state.exp_avg.mul_(o.beta1).add_(g, 1 - o.beta1);
  state.exp_avg_sq.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
  const double bc1 = 1 - std::pow(o.beta1, static_cast<double>(state.step));
  const double bc2 = 1 - std::pow(o.beta2, static_cast<double>(state.step));
  at::Tensor denom = (state.exp_avg_sq.sqrt() / std::sqrt(bc2)).add_(o.eps);
  p.addcdiv_(state.exp_avg, denom, -o.lr / bc1);
}

double clip_coefficient(double total_norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

}  // namespace shardgym::live
