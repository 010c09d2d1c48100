// Tensor-parallel MLP block (pre-LN, with its residual), every strategy.
//
// Full block: Y = X + GELU(LN(X)·A + a)·B + c, A[h,f], B[f,h].
//
// Megatron 1D (tp1d(t), group G1 of t ranks): A = [A_1 … A_t] by columns, B = [B_1; …; B_t]
//   by rows; rank j: Y = X + g(GELU(f(LN(X))·A_j + a_j)·B_j) + c. No communication between
//   the two GEMMs. sp=1: f → all-gather(seq) / reduce-scatter, g → reduce-scatter(seq) /
//   all-gather, X and LN on the rank's sequence slice.
// ATP 2D (tp2d(d1,d2); Cheng et al. 2023, reconstructed): X arrives as hidden slice i2 of n2,
//   A blocked A_{i2,i1} [h/n2, f/n1], B blocked B_{i1,i2} [f/n1, h/n2]:
//   Z = g_G2(f_G1(LN_G2(X_i2))·A_{i2,i1}) + a_i1     fwd all-reduce over d2 of [N, f/n1],
//                                                      bwd all-reduce over d1 of [N, h/n2]
//   Y_i2 = X_i2 + g_G1(f_G2(GELU(Z))·B_{i1,i2}) + c_i2  fwd all-reduce over d1 of [N, h/n2],
//                                                      bwd all-reduce over d2 of [N, f/n1]
//   d2 = 1 is exactly Megatron 1D.
#pragma once

#include <vector>

#include <ATen/Tensor.h>

#include "runtime/live/tp/tp_common.h"

namespace shardgym::live {

// SwiGLU (Shazeer 2020; Llama's MLP, model_spec.h swiglu): A is [h, 2f] with FFN column j's
// gate in column 2j and its up in 2j + 1 (gpt_params.h), GELU(Z) becomes SiLU(gate)·up of
// width f, and the splits above are unchanged: a rank's contiguous columns of A (2f/n1, or
// 2f/heads per head when uneven) hold the gates and ups of its f/n1 rows of B. Without GEMM
// biases (linear_bias = false) a and c are left out.

// The MLP's activation on fc1's output z: GELU (same width), or for SwiGLU SiLU(gate)·up,
// z's columns taken as gate/up pairs (half the width).
at::Tensor mlp_activation(const ModelSpec& m, const at::Tensor& z);

// The block between its G1 mappings (block_forward in tp_block.h adds LN, f, g and the
// residual): n = f_G1(LN(X)) as this rank sees it -> GELU(Z)·B_{i1,i2}, partial over G1.
// params in block_param_shards order (ln.weight, ln.bias, fc1.weight, fc1.bias, fc2.weight,
// fc2.bias, less those the model has not: block_tensors in tp_common.h).
at::Tensor mlp_core(const BlockContext& ctx, const at::Tensor& n,
                    const std::vector<at::Tensor>& params);

}  // namespace shardgym::live
