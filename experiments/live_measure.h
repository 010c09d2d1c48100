// What `calibrate` (experiments/calibrate.cpp) and `validate-sim` on the live run
// (experiments/validate_live.cpp) share: a plan measured on the live run (warm-up, then the
// median of its iterations), the live env of a config and the simulator's spec beside it,
// random valid plans, and error summaries. Internal to those two files.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "env/env.h"
#include "experiments/calibrate.h"
#include "experiments/calibration_fit.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/measurement.h"
#include "runtime/core/plan.h"
#include "runtime/sim/sim_run.h"

namespace shardgym::detail {

constexpr const char* kSimEnv = "shardgym/TPSim-v0";

struct PlanStats {
  double step_s = 0, spread = 0, peak_bytes = 0;
  std::vector<double> rank_peak_bytes;  // each rank's peak over the measured iterations
  double repartition_s = 0, repartition_bytes = 0;  // of the first step, into this plan
  double repartition_peak_bytes = 0;
  double optimizer_s = 0;                           // median over iterations, critical rank
  std::vector<double> fwd, bwd, comm;               // per block, median over iterations
  std::vector<double> steps;                        // every measured step latency
  Plan from;                                        // the plan the run held before

  // Every time in it divided by `f` (the machine's speed factor while it was measured).
  void scale_times(double f) {
    step_s /= f, repartition_s /= f, optimizer_s /= f;
    for (auto* v : {&fwd, &bwd, &comm, &steps})
      for (double& x : *v) x /= f;
  }
};

double spread_of(const std::vector<double>& xs);
std::string failed(const Measurement& m, const Plan& plan);

using Stepper = std::function<Measurement(const Plan&)>;

// Steps into `plan` (the repartition is measured on that first step), runs warm-up − 1 more
// unmeasured iterations, then `iterations` measured ones.
PlanStats measure(const Stepper& step, const Plan& plan, const LiveMeasureOptions& o);

struct LiveSetup {
  ExperimentSpec spec;
  std::unique_ptr<Env> env;
};
// The config's env, which must be a live run (std::invalid_argument otherwise).
LiveSetup open_live(ExperimentSpec spec, const std::string& config);
// The same experiment on the simulator, noise-free.
ExperimentSpec sim_spec_of(const ExperimentSpec& live);

// Random valid plans: each block a uniformly drawn shape-valid catalog entry; plans the
// simulator says do not fit memory are drawn again.
std::vector<Plan> random_plans(const StrategyCatalog& cat, int blocks, int count,
                               std::mt19937_64& rng, const SimRun& sim);

// Random valid pipelined plans for `world` ranks: p drawn from the divisors ≥ 2 of the world
// that the model's layers allow, a random split (every stage at least one layer), m from
// {1, 2, 4}, 1F1B or GPipe, and each block a catalog entry valid over one stage's P/p ranks;
// drawn again until `admit` accepts the plan (both runs can train it and it fits memory).
std::vector<Plan> random_pipelined_plans(const StrategyCatalog& cat, const ModelSpec& model,
                                         int world, int count, std::mt19937_64& rng,
                                         const std::function<bool(const Plan&)>& admit);

ErrorSummary summarize(const std::vector<double>& rel);

}  // namespace shardgym::detail
