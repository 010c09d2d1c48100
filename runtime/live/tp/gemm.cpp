#include "runtime/live/tp/gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace shardgym::live {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Function;
using torch::autograd::variable_list;

// oneDNN's C API (oneapi/dnnl/dnnl.h, stable since 1.0): row-major C = alpha·op(A)·op(B) +
// beta·C, dnnl_dim_t = int64_t, dnnl_status_t 0 = success. With beta = 0, C is not read.
using SgemmFn = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                        float* c, int64_t ldc);

SgemmFn onednn_sgemm() {
  static const SgemmFn fn = []() -> SgemmFn {
    if (!at::hasMKLDNN()) return nullptr;
    // The copy LibTorch loaded (RTLD_NOLOAD: never load a second one); else any copy already
    // in the process's global scope.
    void* lib = ::dlopen("libdnnl.so.2", RTLD_LAZY | RTLD_NOLOAD);
    void* sym = ::dlsym(lib ? lib : RTLD_DEFAULT, "dnnl_sgemm");
    return reinterpret_cast<SgemmFn>(sym);
  }();
  return fn;
}

bool takes_onednn(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.device().is_cpu() &&
         b.device().is_cpu() && a.layout() == at::kStrided && b.layout() == at::kStrided &&
         onednn_gemm_available();
}

// One [rows, cols] matrix with strides (rs, cs) as a row-major sgemm operand: 'N' with leading
// dimension rs, or 'T' (the transpose of a row-major [cols, rows]) with leading dimension cs.
struct Operand {
  char trans = 'N';
  int64_t ld = 1;
};

bool as_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Operand* op) {
  // The stride of a size-1 dimension is never used: pick one that fits.
  if (cols == 1) cs = 1;
  if (rows == 1) rs = cs == 1 ? std::max<int64_t>(cols, 1) : 1;
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {
    *op = {'N', rs};
    return true;
  }
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) {
    *op = {'T', cs};
    return true;
  }
  return false;
}

// a [..., M, K] · b [..., K, N] with the same leading sizes, float32 -> contiguous [..., M, N].
at::Tensor sgemm_batched(at::Tensor a, at::Tensor b) {
  const int64_t nd = a.dim(), M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Operand oa, ob;
  if (!as_operand(M, K, a.stride(-2), a.stride(-1), &oa)) {
    a = a.contiguous();
    as_operand(M, K, a.stride(-2), a.stride(-1), &oa);
  }
  if (!as_operand(K, N, b.stride(-2), b.stride(-1), &ob)) {
    b = b.contiguous();
    as_operand(K, N, b.stride(-2), b.stride(-1), &ob);
  }
  std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 2);
  shape.push_back(M);
  shape.push_back(N);
  at::Tensor out = at::empty(shape, a.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  if (K == 0) return out.zero_();
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* pc = out.data_ptr<float>();
  const int64_t nb = nd - 2;
  std::vector<int64_t> idx(nb, 0);
  const int64_t count = out.numel() / (M * N);
  const SgemmFn sgemm = onednn_sgemm();
  for (int64_t i = 0; i < count; ++i) {
    int64_t off_a = 0, off_b = 0;
    for (int64_t d = 0; d < nb; ++d) {
      off_a += idx[d] * a.stride(d);
      off_b += idx[d] * b.stride(d);
    }
    const int status = sgemm(oa.trans, ob.trans, M, N, K, 1.0f, pa + off_a, oa.ld, pb + off_b,
                             ob.ld, 0.0f, pc + i * M * N, N);
    if (status != 0) {
      throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(status));
    }
    for (int64_t d = nb - 1; d >= 0; --d) {  // next batch index, last dimension fastest
      if (++idx[d] < a.size(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<int64_t> with_last(at::IntArrayRef sizes, int64_t last) {
  std::vector<int64_t> s(sizes.begin(), sizes.end());
  s.back() = last;
  return s;
}

// x [..., K] · w [K, N]; backward dx = dy·wᵀ, dw = xᵀ·dy over the flattened rows.
struct Linear : public Function<Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    const at::Tensor y = sgemm_batched(x.reshape({-1, x.size(-1)}), w);
    return y.view(with_last(x.sizes(), w.size(1)));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor dy = grads[0].reshape({-1, w.size(1)});
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = sgemm_batched(dy, w.t()).view(x.sizes());
    if (ctx->needs_input_grad(1)) dw = sgemm_batched(x.reshape({-1, x.size(-1)}).t(), dy);
    return {dx, dw};
  }
};

// a [..., M, K] · b [..., K, N]; backward da = dy·bᵀ, db = aᵀ·dy per batch element.
struct Batched : public Function<Batched> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    return sgemm_batched(a, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    at::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = sgemm_batched(grads[0], b.transpose(-2, -1));
    if (ctx->needs_input_grad(1)) db = sgemm_batched(a.transpose(-2, -1), grads[0]);
    return {da, db};
  }
};

}  // namespace

bool onednn_gemm_available() {
  return at::globalContext().userEnabledMkldnn() && onednn_sgemm() != nullptr;
}

at::Tensor linear_matmul(const at::Tensor& x, const at::Tensor& w) {
  if (!takes_onednn(x, w) || x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(0)) {
    return at::matmul(x, w);
  }
  return Linear::apply(x, w);
}

at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b) {
  if (!takes_onednn(a, b) || a.dim() < 2 || a.dim() != b.dim() || a.size(-1) != b.size(-2) ||
      a.sizes().slice(0, a.dim() - 2) != b.sizes().slice(0, b.dim() - 2)) {
    return at::matmul(a, b);
  }
  return Batched::apply(a, b);
}

}  // namespace shardgym::live
