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
#include <memory>

#include <ATen/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "runtime/live/comm/comm.h"

namespace shardgym::live {

class ExchangePlan;

at::Tensor copy_to_group(const at::Tensor& x, Comm& group);
at::Tensor reduce_from_group(const at::Tensor& x, Comm& group);
at::Tensor sum_over_group(const at::Tensor& x, Comm& group);
at::Tensor scatter_to_group(const at::Tensor& x, Comm& group, int64_t dim);
at::Tensor gather_from_group(const at::Tensor& x, Comm& group, int64_t dim);
at::Tensor gather_to_parallel(const at::Tensor& x, Comm& group, int64_t dim);
at::Tensor reduce_scatter_to_group(const at::Tensor& x, Comm& group, int64_t dim);

// Split-phase g and f, for chunk pipelining (tp_block.cpp): the all-reduce runs in the
// background between a start and a wait, so the caller computes the next chunk meanwhile.
// Same values and gradients as reduce_from_group / copy_to_group.
//
// reduce_from_group_async: g whose forward all-reduce is started, not finished: the result
//   may be read only after `*work` has been waited. Backward: identity.
at::Tensor reduce_from_group_async(const at::Tensor& x, Comm& group,
                                   std::unique_ptr<CommWork>* work);

// f whose backward all-reduce is split in two autograd nodes joined by a GradAllReduce:
//   y = copy_to_group_async(await_grad_all_reduce(x, link), group, link)
// The backward of copy_to_group_async starts the all-reduce of the gradient; the backward of
// await_grad_all_reduce waits for it. Autograd runs ready nodes latest-created first, so the
// caller creates the awaits of all chunks before any chunk's compute and each chunk's
// copy_to_group_async first in its compute: the backward then starts chunk i's all-reduce
// and runs the other chunks' backward before waiting for it.
class GradAllReduce {
 public:
  GradAllReduce();
  ~GradAllReduce();
  GradAllReduce(const GradAllReduce&);
  GradAllReduce& operator=(const GradAllReduce&);
  struct Slot;  // mappings.cpp; shared by the two nodes, lives as long as the graph

 private:
  friend at::Tensor await_grad_all_reduce(const at::Tensor&, const GradAllReduce&);
  friend at::Tensor copy_to_group_async(const at::Tensor&, Comm&, const GradAllReduce&);
  c10::intrusive_ptr<Slot> slot_;
};
at::Tensor await_grad_all_reduce(const at::Tensor& x, const GradAllReduce& link);
at::Tensor copy_to_group_async(const at::Tensor& x, Comm& group, const GradAllReduce& link);

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
