// The calibration's fitting maths, pure functions of measured and modelled figures
// (docs/calibration.md): least squares with non-negative coefficients, and the device fit.
#pragma once

#include <vector>

namespace shardgym {

// Non-negative least squares y ≈ Σ_j c_j·x_j for up to 6 columns: the unconstrained solution
// on every subset of the columns (the others at 0), the best one with all c_j ≥ 0. Throws
// std::logic_error outside 1 to 6 columns.
std::vector<double> nonneg_lstsq(const std::vector<std::vector<double>>& x,
                                 const std::vector<double>& y);
// The same for two columns: y ≈ a·x1 + b·x2.
void nonneg_fit2(const std::vector<double>& x1, const std::vector<double>& x2,
                 const std::vector<double>& y, double& a, double& b);

// One block row of the calibration at one micro-batch shape: its measured compute (forward +
// backward, waits excluded) per micro-batch, the physical model's compute for it at the
// catalog's device figures, and the kernels and collectives the model counts for it
// (block_kernels, block_collectives).
struct ComputePoint {
  double measured = 0, physics = 0, kernels = 0, collectives = 0;
};
// measured ≈ physics / speed + kernels · kernel_s + collectives · collective_s: the device's
// speed against the catalog's figures (peak FLOP/s and memory bandwidth alike), the time a
// rank's own thread spends on each kernel (CPU ranks, which issue and run their ops on one
// thread) and on each collective besides its exchange (its argument checks, contiguous copies
// and the call into the backend; the exchange itself is the link's). A collective is fitted
// apart because it costs a CPU rank several times a kernel: one term for both let the
// tensor-parallel rows, rich in collectives, set a per-kernel time that over-charged
// collective-free blocks at small micro-batches (docs/live-fidelity.md). With `kernels`
// false, or points at one shape only where the terms cannot be told apart, kernel_s and
// collective_s are 0 and speed the median ratio, as before this fit. fit_error: the median
// |fit / measured − 1|.
struct DeviceFit {
  double speed = 1, kernel_s = 0, collective_s = 0, fit_error = 0;
};
DeviceFit fit_device(const std::vector<ComputePoint>& points, bool kernels);

}  // namespace shardgym
