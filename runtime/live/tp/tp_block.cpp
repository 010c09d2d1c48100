#include "runtime/live/tp/tp_block.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/live/tp/tp_attention.h"
#include "runtime/live/tp/tp_mlp.h"

namespace shardgym::live {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor run_chunks(const BlockContext& ctx, const at::Tensor& x,
                      const std::vector<at::Tensor>& params) {
  const bool attn = ModelSpec::block_kind(ctx.block) == BlockKind::kAttention;
  auto one = [&](const at::Tensor& part) {
    return attn ? attention_forward(ctx, part, params) : mlp_forward(ctx, part, params);
  };
  const int k = ctx.place.strategy.chunks;
  if (k <= 1) return one(x);
  if (x.size(0) % k != 0) {
    throw std::invalid_argument("block " + std::to_string(ctx.block) + ": chunks=" +
                                std::to_string(k) + " does not divide the local batch of " +
                                std::to_string(x.size(0)));
  }
  std::vector<at::Tensor> outs;
  for (const at::Tensor& part : x.chunk(k, 0)) outs.push_back(one(part));
  return at::cat(outs, 0);
}

struct Recompute : public torch::autograd::Function<Recompute> {
  static at::Tensor forward(AutogradContext* ac, const at::Tensor& x, at::TensorList params,
                            const BlockContext* ctx) {
    ac->saved_data["ctx"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(ctx));
    variable_list keep = {x};
    keep.insert(keep.end(), params.begin(), params.end());
    ac->save_for_backward(keep);
    return run_chunks(*ctx, x, params.vec());
  }
  static variable_list backward(AutogradContext* ac, variable_list grads) {
    const auto* ctx = reinterpret_cast<const BlockContext*>(
        static_cast<intptr_t>(ac->saved_data["ctx"].toInt()));
    variable_list saved = ac->get_saved_variables();
    variable_list inputs;
    for (const auto& s : saved) inputs.push_back(s.detach().requires_grad_(true));
    at::Tensor y;
    {
      at::AutoGradMode enable(true);
      y = run_chunks(*ctx, inputs[0], variable_list(inputs.begin() + 1, inputs.end()));
    }
    variable_list g = torch::autograd::grad({y}, inputs, {grads[0]}, /*retain_graph=*/false,
                                            /*create_graph=*/false, /*allow_unused=*/true);
    g.push_back(at::Tensor());  // for ctx
    return g;
  }
};

}  // namespace

at::Tensor block_forward(const BlockContext& ctx, const at::Tensor& x,
                         const std::vector<at::Tensor>& params) {
  if (!ctx.place.strategy.recompute || !at::GradMode::is_enabled())
    return run_chunks(ctx, x, params);
  return Recompute::apply(x, at::TensorList(params), &ctx);
}

}  // namespace shardgym::live
