// The matrix products of the TP layers, float32 through oneDNN's sgemm when LibTorch has it.
//
// Why: Debian's LibTorch 1.13 runs at::matmul on the netlib reference BLAS
// (BLAS_INFO=generic), about 5 GFLOP/s on the development machine. The same LibTorch is built
// with oneDNN (at::hasMKLDNN()) and loads its shared library, whose JIT sgemm runs the same
// products 20–35× faster (docs/benchmarks-live.md). The oneDNN entry point is looked up at
// run time in the library LibTorch already loaded (no header, no extra link), so a LibTorch
// without oneDNN simply keeps at::matmul.
//
// Only float32 CPU tensors take the oneDNN path, forward and backward (custom autograd
// functions whose backward products also go through sgemm). Everything else — float64, the
// equivalence tests' dtype, included — calls at::matmul exactly as before, bit for bit.
// Results differ from at::matmul's only by float32 summation order. LibTorch's own switch
// turns the path off: at::globalContext().setUserEnabledMkldnn(false) (Python:
// torch.backends.mkldnn.enabled = False), e.g. to compare against at::matmul.
#pragma once

#include <ATen/Tensor.h>

namespace shardgym::live {

// x [..., K] · w [K, N] -> [..., N] (a layer's weight).
at::Tensor linear_matmul(const at::Tensor& x, const at::Tensor& w);

// a [..., M, K] · b [..., K, N] -> [..., M, N], the same leading (batch) dimensions; any
// strides (views such as transposes are read in place).
at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b);

// Whether float32 products take the oneDNN path now (found, and not switched off).
bool onednn_gemm_available();

}  // namespace shardgym::live
