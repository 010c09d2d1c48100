// One block (attention or MLP) of one rank with its strategy's execution options.
//
// The partition math is in tp_attention.h / tp_mlp.h; both blocks are
//   Y = X + g_G1(core(f_G1(LN_G2(X)))) + c
// (sp=1: f, g the sequence all-gather / reduce-scatter; LN is RMSNorm, and c absent, for a
// model with those traits: tp_common.h). On top of it:
//   chunks=k     ATP chunk-based overlap: the rank's batch rows run as k independent chunks
//                (same math: rows are independent; same volume in k messages). When G1 has
//                more than one rank and g is an all-reduce (not sp), g of chunk i runs in the
//                background while chunk i+1 computes (Comm::all_reduce_async), and in the
//                backward f's all-reduce of chunk i's input gradient runs while the other
//                chunks' backward computes. sp=1 chunks, and ctx.overlap = false, run back to
//                back with blocking collectives. G2 collectives (tp2d) stay blocking.
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
