// What the attention and MLP blocks of one rank share: their placement, their groups, and the
// LayerNorm over a hidden dimension that may be split across mesh axis d2.
#pragma once

#include <ATen/Tensor.h>

#include "runtime/core/model_spec.h"
#include "runtime/live/comm/comm.h"
#include "runtime/core/placement.h"

namespace shardgym::live {

struct BlockContext {
  ModelSpec model;
  int block = 0;
  BlockPlacement place;
  Comm* g1 = nullptr;  // the d1 collectives (tp1d: the tensor group); size 1 = none
  Comm* g2 = nullptr;  // the d2 collectives (hidden split); size 1 = none
  // chunks=k: run each chunk's G1 all-reduces in the background while the next chunk
  // computes (tp_block.h). false: blocking, chunk after chunk (for comparison).
  bool overlap = true;
};

// LayerNorm over the last dimension when it is split over `g2` (each rank holds h/n2
// features): the mean and the centred second moment are summed over g2 with sum_over_group
// (all-reduce forward and backward), two passes as at::layer_norm. With |g2| = 1 it is
// at::layer_norm itself.
at::Tensor group_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            Comm& g2, int64_t full_hidden);

}  // namespace shardgym::live
