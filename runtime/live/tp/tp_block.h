// One block (attention or MLP) of one rank with its strategy's execution options.
//
// The partition math is in tp_attention.h / tp_mlp.h. On top of it:
//   chunks=k     ATP chunk-based overlap: the rank's batch rows run as k independent chunks,
//                so the collective of chunk i can overlap the compute of chunk i+1. Comm's
//                collectives are blocking, so here the chunks run back to back; the math is
//                that of the unchunked block (rows are independent) and the communication
//                is the same volume in k messages.
//   recompute=1  activation recomputation: the forward keeps only the block input and
//                parameters; the backward reruns the forward (its collectives included) with
//                grad enabled and differentiates it (Korthikanti et al. "full" recompute).
#pragma once

#include <vector>

#include <ATen/Tensor.h>

#include "runtime/live/tp/tp_common.h"

namespace shardgym::live {

// x: the rank's box of the residual stream; returns the block output in the same box.
// `ctx` must outlive the backward pass (recompute keeps a pointer to it).
at::Tensor block_forward(const BlockContext& ctx, const at::Tensor& x,
                         const std::vector<at::Tensor>& params);

}  // namespace shardgym::live
