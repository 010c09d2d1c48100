#include "runtime/live/tp/rotary.h"

#include <stdexcept>

#include <ATen/ATen.h>

namespace shardgym::live {

at::Tensor apply_rotary(const at::Tensor& x) {
  const int64_t S = x.size(-2), d = x.size(-1), half = d / 2;
  if (d % 2 != 0) throw std::invalid_argument("rotary embeddings need an even head_dim");
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor inv_freq = at::pow(kRopeTheta, at::arange(half, f64) * (-2.0 / d));
  const at::Tensor angle = at::arange(S, f64).unsqueeze(1) * inv_freq.unsqueeze(0);  // [S, d/2]
  const at::Tensor both = at::cat({angle, angle}, -1);                                  // [S, d]
  const at::Tensor cos = both.cos().to(x.options()), sin = both.sin().to(x.options());
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace shardgym::live
