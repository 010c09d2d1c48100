#include "runtime/live/tp/tp_common.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/live/tp/mappings.h"

namespace shardgym::live {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kEps = 1e-5;  // as at::layer_norm in the reference

// RMSNorm that keeps only its input and the per-row 1/rms for the backward, as fused RMSNorm
// kernels do (Transformer Engine's, which Megatron-LM's Llama runs; Apex's FusedRMSNorm):
// written with autograd's elementary operations it would also keep x·r and x², one more
// [rows, h] tensor or two per norm than the activations counted (runtime/core/live_memory.cpp).
// g2: the group the hidden dimension is split over, or null. With r = (Σx²/H + eps)^(-1/2),
// w the weight and g the output gradient:
//   dx = r·(g·w) − x·r³·Σ(g·w·x)/H  (Σ over the whole hidden dimension: all-reduce on g2)
//   dw = Σ_rows g·x·r.
struct RmsNorm : public torch::autograd::Function<RmsNorm> {
  static at::Tensor forward(AutogradContext* ac, const at::Tensor& x, const at::Tensor& w,
                            Comm* g2, int64_t full_hidden) {
    at::Tensor ss = (x * x).sum(-1, true);
    if (g2) g2->all_reduce(ss);
    const at::Tensor r = at::rsqrt(ss / static_cast<double>(full_hidden) + kEps);
    ac->saved_data["g2"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(g2));
    ac->saved_data["h"] = full_hidden;
    ac->save_for_backward({x, w, r});
    return x * r * w;
  }
  static variable_list backward(AutogradContext* ac, variable_list grads) {
    auto* g2 = reinterpret_cast<Comm*>(static_cast<intptr_t>(ac->saved_data["g2"].toInt()));
    const double H = static_cast<double>(ac->saved_data["h"].toInt());
    const variable_list saved = ac->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &r = saved[2], &g = grads[0];
    const at::Tensor gw = g * w;
    at::Tensor dot = (gw * x).sum(-1, true);
    if (g2) g2->all_reduce(dot);
    const at::Tensor dx = r * gw - x * (r * r * r) * (dot / H);
    const at::Tensor dw = (g * x * r).reshape({-1, x.size(-1)}).sum(0);
    return {dx, dw, at::Tensor(), at::Tensor()};
  }
};

// SwiGLU on gate/up pairs keeping only its input for the backward, as Megatron-LM's
// SwiGLUFunction (fused_bias_swiglu.py) does: out = SiLU(a)·b, σ = sigmoid(a),
//   da = g·b·σ·(1 + a·(1 − σ)),  db = g·a·σ.
// Elementary operations would also keep SiLU(a), an [rows, f] tensor more than counted.
struct SwiGlu : public torch::autograd::Function<SwiGlu> {
  static at::Tensor forward(AutogradContext* ac, const at::Tensor& z) {
    ac->save_for_backward({z});
    const at::Tensor pairs = z.unflatten(-1, {z.size(-1) / 2, 2});
    return at::silu(pairs.select(-1, 0)) * pairs.select(-1, 1);
  }
  // In place into dz where it can: one [rows, f] temporary (σ) besides dz itself.
  static variable_list backward(AutogradContext* ac, variable_list grads) {
    const at::Tensor z = ac->get_saved_variables()[0];
    const at::Tensor pairs = z.unflatten(-1, {z.size(-1) / 2, 2});
    const at::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1), &g = grads[0];
    at::Tensor dz = at::empty_like(z, at::MemoryFormat::Contiguous);
    const at::Tensor dpairs = dz.unflatten(-1, {z.size(-1) / 2, 2});
    at::Tensor da = dpairs.select(-1, 0), db = dpairs.select(-1, 1);
    at::Tensor sig = at::sigmoid(a);
    at::mul_out(db, g, a).mul_(sig);               // g·a·σ
    at::mul_out(da, g, b).mul_(sig);               // g·b·σ
    da.mul_(sig.neg_().add_(1).mul_(a).add_(1));   // · (1 + a·(1 − σ))
    return {dz};
  }
};

}  // namespace

BlockTensors block_tensors(const ModelSpec& m, const std::vector<at::Tensor>& params) {
  const size_t want = 3 + (m.rmsnorm ? 0 : 1) + (m.linear_bias ? 2 : 0);
  if (params.size() != want)
    throw std::logic_error("block_tensors: " + std::to_string(params.size()) +
                           " parameters, the model's block has " + std::to_string(want));
  size_t k = 0;
  BlockTensors t;
  t.norm_weight = params[k++];
  if (!m.rmsnorm) t.norm_bias = params[k++];
  t.in_weight = params[k++];
  if (m.linear_bias) t.in_bias = params[k++];
  t.out_weight = params[k++];
  if (m.linear_bias) t.out_bias = params[k++];
  return t;
}

at::Tensor add_bias(const at::Tensor& x, const at::Tensor& b) {
  return b.defined() ? x + b : x;
}

at::Tensor group_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            Comm& g2, int64_t full_hidden) {
  if (g2.size() == 1) return at::layer_norm(x, {x.size(-1)}, weight, bias, kEps);
  const double inv_h = 1.0 / static_cast<double>(full_hidden);
  at::Tensor mean = sum_over_group(x.sum(-1, true), g2) * inv_h;
  at::Tensor xc = x - mean;
  at::Tensor var = sum_over_group((xc * xc).sum(-1, true), g2) * inv_h;
  return xc * at::rsqrt(var + kEps) * weight + bias;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) {
  return x * at::rsqrt((x * x).mean(-1, true) + kEps) * weight;
}

at::Tensor group_rms_norm(const at::Tensor& x, const at::Tensor& weight, Comm& g2,
                          int64_t full_hidden) {
  return RmsNorm::apply(x, weight, g2.size() > 1 ? &g2 : nullptr, full_hidden);
}

at::Tensor local_rms_norm(const at::Tensor& x, const at::Tensor& weight) {
  return RmsNorm::apply(x, weight, nullptr, x.size(-1));
}

at::Tensor swiglu(const at::Tensor& z) { return SwiGlu::apply(z); }

at::Tensor group_norm(const ModelSpec& m, const at::Tensor& x, const BlockTensors& t, Comm& g2) {
  return m.rmsnorm ? group_rms_norm(x, t.norm_weight, g2, m.hidden)
                   : group_layer_norm(x, t.norm_weight, t.norm_bias, g2, m.hidden);
}

}  // namespace shardgym::live
