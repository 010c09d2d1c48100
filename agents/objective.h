// What the planners (ATP search, oracles) minimise, and how they find the experiment behind
// an env.
//
// The cost of a plan is the env's raw cost of one iteration (PartitionEnv's raw reward with
// the sign flipped), without the repartition: planners compare steady states, and the dynamic
// oracle charges repartitions separately.
//   cost = w_lat·latency/tokens·1e6 + w_mem·peak/capacity + w_energy·energy/tokens
// With NormalizeReward and latency as the only weight, minimising this maximises the reward
// exactly; with several weights the normalised reward is a sum of ratios and this linear
// cost is the planners' stand-in for it. With per_token false the latency and energy terms
// are a whole step's (× tokens): summed over an episode's steps that is its time and energy,
// what throughput weighs (and hindsight-static), where the env's return sums per-token times.
#pragma once

#include "env/env.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/measurement.h"
#include "runtime/core/training_run.h"

namespace shardgym {

struct PlanObjective {
  RewardSpec weights;
  double memory_capacity = 0;  // bytes; the smallest device (RunContext::memory_capacity)
  bool per_token = true;       // false: latency and energy of the whole step (see above)

  // +inf for a measurement that failed or ran out of memory. with_repartition: charge the
  // repartition time too (then this is exactly the env's raw cost, sign flipped).
  double cost(const Measurement& m, bool with_repartition = false) const;
  // The same figure whether or not the plan fits (for cost decompositions).
  double raw_cost(const Measurement& m, bool with_repartition = false) const;
  // Fullest rank's peak memory over capacity (> 1: out of memory).
  double memory_fraction(const Measurement& m) const;
  // estimate() of `plan` on `run`, costed; +inf when the run cannot estimate or it does not fit.
  double cost_of(const TrainingRun& run, const Plan& plan) const;
};

// Weights from the experiment behind `env` when there is one (latency only otherwise),
// capacity from the run's context.
PlanObjective objective_for(Env& env);
PlanObjective objective_for(const TrainingRun& run, const RewardSpec& weights);

// The experiment an env was built from: unwraps Wrapper layers down to a PartitionEnv.
// nullptr when the innermost env is not a PartitionEnv.
const ExperimentSpec* find_experiment(Env& env);

}  // namespace shardgym
