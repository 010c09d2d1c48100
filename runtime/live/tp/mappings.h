// Conjugate autograd mappings: the communication of tensor parallelism as differentiable
// functions (Megatron-LM core/tensor_parallel/mappings.py, in C++ torch::autograd::Function).
//
// Gradient convention (the "Megatron invariant"): where a tensor is replicated over ranks,
// every holder's gradient is the full, true gradient of the loss with respect to it; where
// each rank holds a *partial* contribution (a slice of a sum), its gradient is the true
// gradient of that contribution. Each mapping below is the pair (forward, backward) that keeps
// this invariant; a forward collective is conjugate to its backward one:
//
//   copy_to_group            f: identity        / all-reduce      replicated -> parallel GEMM
//   reduce_from_group        g: all-reduce      / identity        partial sums -> replicated
//   sum_over_group              all-reduce      / all-reduce      partial sums used per rank
//   scatter_to_group            keep own slice  / all-gather
//   gather_from_group           all-gather      / keep own slice  output used replicated
//   gather_to_parallel          all-gather      / reduce-scatter  output feeds a parallel GEMM
//   reduce_scatter_to_group     reduce-scatter  / all-gather      partial sums -> slices
//
// (sequence parallelism: gather_to_parallel along the sequence replaces f, and
// reduce_scatter_to_group along the sequence replaces g; ATP 2D: reduce-scatter of QKV and
// all-gather before the attention output GEMM along the head dimension.)
// A group of size 1 makes every mapping the identity. `group` must outlive the backward pass.
#pragma once

#include <cstdint>
#include <functional>

#include <ATen/Tensor.h>

#include "runtime/live/comm.h"

namespace shardgym::live {

class ExchangePlan;

at::Tensor copy_to_group(const at::Tensor& x, Comm& group);
at::Tensor reduce_from_group(const at::Tensor& x, Comm& group);
at::Tensor sum_over_group(const at::Tensor& x, Comm& group);
at::Tensor scatter_to_group(const at::Tensor& x, Comm& group, int64_t dim);
at::Tensor gather_from_group(const at::Tensor& x, Comm& group, int64_t dim);
at::Tensor gather_to_parallel(const at::Tensor& x, Comm& group, int64_t dim);
at::Tensor reduce_scatter_to_group(const at::Tensor& x, Comm& group, int64_t dim);

// Moves a replicated-or-sliced activation to another layout: forward runs `forward_plan`,
// backward runs `backward_plan` (its reverse) on the gradient. Under the invariant above the
// gradient of a replicated element is the same on all holders, so any holder can supply it.
// Both plans and `world` must outlive the backward pass.
at::Tensor redistribute(const at::Tensor& x, const ExchangePlan& forward_plan,
                        const ExchangePlan& backward_plan, Comm& world);

// Identity whose backward calls `*hook` when the gradient reaches it (per-block backward
// timing). `hook` must outlive the backward pass.
at::Tensor backward_probe(const at::Tensor& x, const std::function<void()>* hook);

}  // namespace shardgym::live
