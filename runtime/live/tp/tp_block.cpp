#include "runtime/live/tp/tp_block.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/live/tp/mappings.h"
#include "runtime/live/tp/tp_attention.h"
#include "runtime/live/tp/tp_mlp.h"

namespace shardgym::live {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor core(const BlockContext& ctx, const at::Tensor& n,
                const std::vector<at::Tensor>& params) {
  return ModelSpec::block_kind(ctx.block) == BlockKind::kAttention
             ? attention_core(ctx, n, params)
             : mlp_core(ctx, n, params);
}

// LayerNorm or RMSNorm (tp_common.h), over the hidden slice of d2.
at::Tensor layer_norm(const BlockContext& ctx, const at::Tensor& x,
                      const std::vector<at::Tensor>& params) {
  return group_norm(ctx.model, x, block_tensors(ctx.model, params), *ctx.g2);
}

// The residual with the output GEMM's bias c (proj.bias, fc2.bias) where the model has it.
at::Tensor residual(const BlockContext& ctx, const at::Tensor& x, const at::Tensor& y,
                    const std::vector<at::Tensor>& params) {
  return add_bias(x + y, block_tensors(ctx.model, params).out_bias);
}

// One chunk (or the whole batch) with blocking collectives.
at::Tensor run_blocking(const BlockContext& ctx, const at::Tensor& x,
                        const std::vector<at::Tensor>& params) {
  Comm& g1 = *ctx.g1;
  at::Tensor n = layer_norm(ctx, x, params);
  n = ctx.place.sp ? gather_to_parallel(n, g1, 1) : copy_to_group(n, g1);
  at::Tensor y = core(ctx, n, params);
  y = ctx.place.sp ? reduce_scatter_to_group(y, g1, 1) : reduce_from_group(y, g1);
  return residual(ctx, x, y, params);
}

// k chunks, G1 all-reduces in flight behind compute. Forward: chunk i's g is started, chunk
// i+1 computes, then chunk i's g is waited. Backward: autograd runs ready nodes latest-created
// first, so the LayerNorms and gradient awaits of every chunk are created before any chunk's
// core: the backward then runs every chunk's core (each starting its input-gradient
// all-reduce as it finishes) before the first await.
// Sequence parallel (sp=1): the output reduce-scatter is written as an all-reduce in flight
// followed by keeping this rank's slice (scatter_to_group, whose backward all-gather is the
// reduce-scatter's), which is how a backend without a native reduce-scatter computes it
// anyway: the same operations, overlapped. Its input all-gather and that all-gather's
// backward reduce-scatter stay blocking.
at::Tensor run_overlapped(const BlockContext& ctx, const std::vector<at::Tensor>& parts,
                          const std::vector<at::Tensor>& params) {
  Comm& g1 = *ctx.g1;
  const bool sp = ctx.place.sp;
  const size_t k = parts.size();
  std::vector<GradAllReduce> links(k);
  std::vector<at::Tensor> n(k), y(k);
  for (size_t i = 0; i < k; ++i) {
    n[i] = layer_norm(ctx, parts[i], params);
    if (!sp) n[i] = await_grad_all_reduce(n[i], links[i]);
  }
  std::vector<std::unique_ptr<CommWork>> pending(k);
  for (size_t i = 0; i < k; ++i) {
    const at::Tensor in =
        sp ? gather_to_parallel(n[i], g1, 1) : copy_to_group_async(n[i], g1, links[i]);
    y[i] = reduce_from_group_async(core(ctx, in, params), g1, &pending[i]);
    if (i > 0) pending[i - 1]->wait();
  }
  pending[k - 1]->wait();
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < k; ++i) {
    const at::Tensor yi = sp ? scatter_to_group(y[i], g1, 1) : y[i];
    outs.push_back(residual(ctx, parts[i], yi, params));
  }
  return at::cat(outs, 0);
}

at::Tensor run_chunks(const BlockContext& ctx, const at::Tensor& x,
                      const std::vector<at::Tensor>& params) {
  const int k = ctx.place.strategy.chunks;
  if (k <= 1) return run_blocking(ctx, x, params);
  if (x.size(0) % k != 0) {
    throw std::invalid_argument("block " + std::to_string(ctx.block) + ": chunks=" +
                                std::to_string(k) + " does not divide the local batch of " +
                                std::to_string(x.size(0)));
  }
  const std::vector<at::Tensor> parts = x.chunk(k, 0);
  // sp=1 overlaps only where the reduce-scatter is an all-reduce anyway (Gloo): over NCCL's
  // native reduce-scatter the all-reduce would move twice the bytes.
  const bool overlap = ctx.overlap && ctx.g1->size() > 1 &&
                       (!ctx.place.sp || !ctx.g1->native_reduce_scatter());
  if (overlap) return run_overlapped(ctx, parts, params);
  std::vector<at::Tensor> outs;
  for (const at::Tensor& part : parts) outs.push_back(run_blocking(ctx, part, params));
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
