// AdamW on plain tensors (Loshchilov & Hutter; the update of torch::optim::AdamW), written out
// so that the state (exp_avg, exp_avg_sq, step) is ours to slice and move between layouts.
//
// Per element: p ← p·(1 − lr·wd) (decoupled decay, only when `decay`), g ← scale·grad,
// m ← β1·m + (1 − β1)·g, v ← β2·v + (1 − β2)·g², p ← p − lr/(1 − β1^step) · m /
// (sqrt(v)/sqrt(1 − β2^step) + eps). The update is elementwise, so a shard updated with the
// state of that shard equals the same slice of the unpartitioned update.
// Gradient clipping uses the global norm over the whole model: scale = min(1, clip/(norm +
// 1e-6)) (torch.nn.utils.clip_grad_norm_); clip ≤ 0 disables it.
#pragma once

#include <cstdint>

#include <ATen/Tensor.h>

namespace shardgym::live {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

struct AdamWState {
  at::Tensor exp_avg, exp_avg_sq;  // same shape as the parameter (shard)
  int64_t step = 0;
};

// Zero moments shaped like `param`.
AdamWState adamw_init(const at::Tensor& param);

// One update of `param` in place (under no-grad). `grad_scale` multiplies the gradient first.
void adamw_update(const at::Tensor& param, const at::Tensor& grad, AdamWState& state,
                  const AdamWOptions& options, bool decay, double grad_scale);

// min(1, max_norm / (total_norm + 1e-6)); 1 when max_norm ≤ 0.
double clip_coefficient(double total_norm, double max_norm);

}  // namespace shardgym::live
