// What the attention and MLP blocks of one rank share: their placement, their groups, their
// parameters by role, and the norm (LayerNorm or RMSNorm) over a hidden dimension that may be
// split across mesh axis d2.
#pragma once

#include <vector>

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

// A block's parameters by role, from the list in block_param_shards order (placement.cpp
// block_tensor_specs): ln.weight, [ln.bias unless rmsnorm], qkv|fc1.weight, [bias unless
// !linear_bias], proj|fc2.weight, [bias]. Those the model leaves out stay undefined.
struct BlockTensors {
  at::Tensor norm_weight, norm_bias, in_weight, in_bias, out_weight, out_bias;
};
BlockTensors block_tensors(const ModelSpec& m, const std::vector<at::Tensor>& params);

// x + b, or x where b is undefined (a GEMM without bias).
at::Tensor add_bias(const at::Tensor& x, const at::Tensor& b);

// LayerNorm over the last dimension when it is split over `g2` (each rank holds h/n2
// features): the mean and the centred second moment are summed over g2 with sum_over_group
// (all-reduce forward and backward), two passes as at::layer_norm. With |g2| = 1 it is
// at::layer_norm itself.
at::Tensor group_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            Comm& g2, int64_t full_hidden);

// RMSNorm (Zhang & Sennrich 2019, Llama's norm) over the last dimension, split over `g2` as
// above: y = x / sqrt(mean(x²) + eps) · weight, the sum of x² all-reduced over g2 in the
// forward and the backward's Σ(g·w·x) in the backward. eps 1e-5 as the LayerNorm's. Its own
// backward keeps only x and 1/rms (as fused RMSNorm kernels do; tp_common.cpp).
at::Tensor group_rms_norm(const at::Tensor& x, const at::Tensor& weight, Comm& g2,
                          int64_t full_hidden);
// The same over an unsplit hidden dimension (the final norm).
at::Tensor local_rms_norm(const at::Tensor& x, const at::Tensor& weight);
// The unsplit RMSNorm in autograd's elementary operations, as the reference model computes it.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight);

// SwiGLU's SiLU(gate)·up on z [..., 2c] of gate/up pairs (gate 2j, up 2j + 1) -> [..., c],
// its backward keeping only z (as Megatron-LM's fused SwiGLU).
at::Tensor swiglu(const at::Tensor& z);

// The block's norm: RMSNorm when the model has it, else LayerNorm.
at::Tensor group_norm(const ModelSpec& m, const at::Tensor& x, const BlockTensors& t, Comm& g2);

}  // namespace shardgym::live
