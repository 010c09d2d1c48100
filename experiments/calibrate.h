// Closing the loop between the live runtime and the simulator (docs/calibration.md):
//
//   calibrate_live      runs every catalog strategy of a live config on the live runtime (a
//                       plan per strategy, warm-up then median over iterations), records each
//                       (block kind, strategy)'s forward, backward and communication time, fits
//                       the per-step overhead and the optimizer's seconds per parameter, the
//                       device's effective compute rate and the link's α–β from them, and
//                       returns the calibration file's contents.
//   validate_live       runs N random valid plans, with repartitions between them, on the live
//                       run and on the simulator of the same config (calibrated or not), and
//                       compares step latency, per-block times, peak memory and repartition
//                       time and bytes, and the two rankings of the plans.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "experiments/calibration_file.h"

namespace shardgym {

struct LiveMeasureOptions {
  int warmup = 2;       // iterations after a plan change that are not measured
  int iterations = 5;   // measured iterations per plan (median)
  uint64_t seed = 0;
  std::function<void(const std::string&)> progress;  // one line per plan; may be empty
  int mixed_plans = 24;  // calibrate: random plans after the uniform ones (see calibrate_live)
  int passes = 3;        // calibrate: passes over the uniform plans (the table's median)
  // calibrate: a reference plan beside each plan (calibrate_live); validate_live: the
  // calibration's reference before and after the pass (off by default there)
  bool drift_reference = true;
  // calibrate, CPU ranks: the uniform plans once more at a small micro-batch, for the device
  // fit's time per kernel (calibration_fit.h). Off: one speed scale, no kernel time.
  bool shape_pass = true;
  // calibrate: the pipelined uniform plans of the schedule's fill and drain
  // (calibrate_pipelines.h); off where the world cannot form two stages.
  bool pipeline_pass = true;
};

// `repeat_pairs` (optional): each uniform plan's step against its own a pass later, after the
// drift reference, for the command's noise check (experiments/noise_gate.h).
// `config` must name the live env. Throws BadInput-like std::invalid_argument on a config that
// is not live, std::runtime_error when the live run fails.
CalibrationFile calibrate_live(const std::string& config, const LiveMeasureOptions& options,
                               const std::string& command_line,
                               std::vector<std::pair<double, double>>* repeat_pairs = nullptr);

struct PlanComparison {
  std::string plan;
  int stages = 1, micro_batches = 1;  // the plan's pipeline part (1, 1 without one)
  double live_step_s = 0, sim_step_s = 0, live_spread = 0;
  double live_peak_bytes = 0, sim_peak_bytes = 0;  // largest rank
  std::vector<double> live_rank_peak_bytes, sim_rank_peak_bytes;  // rank by rank
  // The live ranks' analytic estimate (runtime/core/live_memory.h), rank by rank.
  std::vector<double> estimate_rank_peak_bytes;
  double live_repartition_s = 0, sim_repartition_s = 0;  // into this plan (0 for the first)
  double live_repartition_bytes = 0, sim_repartition_bytes = 0;
  // Memory a rank held during that repartition on top of its state, the largest rank.
  double live_repartition_peak_bytes = 0, sim_repartition_peak_bytes = 0;
  std::vector<double> live_fwd, sim_fwd, live_bwd, sim_bwd, live_comm, sim_comm;  // per block
};

struct ErrorSummary {
  double median = 0, p90 = 0;  // of |predicted / measured − 1|
  int n = 0;
};

struct LiveValidation {
  std::string config, calibration;  // calibration: "" = the uncalibrated simulator
  int ranks = 0;
  std::string launch;
  std::vector<PlanComparison> plans;
  ErrorSummary step, fwd, bwd, comm, memory, repartition_s, repartition_bytes, repartition_peak;
  // Peak memory rank by rank: the simulator's, and the live ranks' analytic estimate.
  ErrorSummary rank_memory, rank_memory_estimate;
  double kendall_tau = 0;
  double live_spread_median = 0;  // run-to-run spread of the live step latency, (p90−p10)/median
  // With `repeat`: the live run's second visit of every plan against its first (step latency),
  // and τ between the two visits: the noise floor of the comparison.
  ErrorSummary repeat;
  double repeat_tau = 0;
  std::vector<std::pair<double, double>> repeat_pairs;  // (first, second) step latency per plan
  // With the calibration's drift reference (LiveMeasureOptions::drift_reference, and a file
  // that records it): that plan's step before the first plan and after the last, its median
  // in the calibration, and the step errors and τ with each live step divided by the machine's
  // speed factor then (interpolated between the two). reference empty: not measured.
  std::string reference;
  double calibrated_reference_s = 0, reference_before_s = 0, reference_after_s = 0;
  ErrorSummary step_at_calibration_speed;
  double kendall_tau_at_calibration_speed = 0;
  // With pipelined plans: per micro-batch count m, the median of sim / live − 1 of the step
  // (signed: a trend with m shows as a change of sign) and how many plans had that m.
  struct SignedByMicroBatches {
    int micro_batches = 1;
    double median = 0;
    int n = 0;
  };
  std::vector<SignedByMicroBatches> step_by_micro_batches;  // empty: no pipelined plan
};

struct LiveValidationOptions : LiveMeasureOptions {
  LiveValidationOptions() { drift_reference = false; }  // validate-sim --drift-reference
  int plans = 30;
  bool repeat = true;
  // Draw pipelined plans (validate-sim --pipelines): each a random p ≥ 2 that divides the
  // world and the layers allow, a random split, m ∈ {1, 2, 4}, 1F1B or GPipe, and blocks valid
  // over one stage's ranks. The runs step plan to plan directly (the env keeps p fixed within
  // an episode), so --traces does not apply.
  bool pipelines = false;
  std::string calibration;  // file; "" = the config's cluster.calibration, if any
  // Non-empty: the first pass is recorded as traces PREFIX.live.h5 and PREFIX.sim.h5 (every
  // iteration, warm-up included, the same plans step for step; `git_sha` goes into them).
  std::string traces, git_sha;
};

LiveValidation validate_live(const std::string& config, const LiveValidationOptions& options);

std::string live_validation_table(const LiveValidation& v);
std::string live_validation_json(const LiveValidation& v);

}  // namespace shardgym
