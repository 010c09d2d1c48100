// The calibration's fitting maths, pure functions of measured and modelled figures
// (docs/calibration.md): least squares with non-negative coefficients, and the device fit.
#pragma once

#include <vector>

namespace shardgym {

// |predicted / measured − 1| (1 where only the measurement is 0, 0 where both are).
double rel_error(double predicted, double measured);

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

// seconds ≈ α · steps + bytes / bandwidth over a link's exchanges (ring steps and bytes each
// rank sends; non-negative). inv_bandwidth 0 where bytes explain nothing. fit_error: the
// median relative error over the points (0 without points).
struct LinkFit {
  double alpha = 0, inv_bandwidth = 0, fit_error = 0;
};
LinkFit fit_link(const std::vector<double>& steps, const std::vector<double>& bytes,
                 const std::vector<double>& seconds);

// What the calibrated simulator leaves unexplained of each plan's step (`residual`, seconds),
// per plan: the parameters each rank updates, its changes of activation layout and the link
// model's time for them. With the optimizer timed on the ranks (`optimizer` not all 0), its
// fixed time and seconds per parameter are fitted from that time and taken out of the
// residual first; without it, the residual's fit finds the seconds per parameter.
// fit_error: the median |fit − residual| over the plan's step (`step_s`).
struct StepTermsFit {
  double overhead_s = 0, redistribution_s = 0, redistribution_scale = 0;
  double optimizer_fixed_s = 0, optimizer_s_per_param = 0;
  bool optimizer_timed = false;
  double fit_error = 0;
};
StepTermsFit fit_step_terms(const std::vector<double>& params, const std::vector<double>& layouts,
                            const std::vector<double>& transfers, std::vector<double> residual,
                            const std::vector<double>& optimizer,
                            const std::vector<double>& step_s);

// peak ≈ state_scale · state + activation_scale · activations + base_bytes (each ≥ 0).
struct MemoryFit {
  double state_scale = 0, activation_scale = 0, base_bytes = 0, fit_error = 0;
};
MemoryFit fit_memory(const std::vector<double>& state, const std::vector<double>& activations,
                     const std::vector<double>& peak);

// seconds ≈ fixed + per_block · blocks + per_message · messages + bytes / bandwidth over the
// measured repartitions. Each is measured once, and on 4 rank threads one in about 25 takes
// ten times its prediction (a rank descheduled in the middle of it), which pulls a
// least-squares fit: fit, leave out the changes more than 3 times the median relative error
// off (and more than 25 %), fit again on the rest. fit_error: the median over every change,
// those left out too. fitted false (and the rest 0) with fewer changes than terms.
struct RepartitionFit {
  bool fitted = false;
  double fixed_s = 0, per_block_s = 0, per_message_s = 0, inv_bandwidth = 0;
  int left_out = 0;
  double left_out_limit = 0;  // relative error past which a change was left out
  double fit_error = 0;
  // A change's time under these terms.
  double predict(double blocks, double messages, double bytes) const {
    return fixed_s + per_block_s * blocks + per_message_s * messages + inv_bandwidth * bytes;
  }
};
RepartitionFit fit_repartition(const std::vector<double>& blocks,
                               const std::vector<double>& messages,
                               const std::vector<double>& bytes,
                               const std::vector<double>& seconds);

}  // namespace shardgym
