// SimRun: a simulated tensor-parallel training run (env id "shardgym/TPSim-v0"): an episode
// over a PlanPricer (plan_pricer.h), which says what a plan costs under the conditions
// installed. The run holds what an episode changes: the step, the scenario's state at it, the
// noise, the plan in force and the ranks lost or replaced.
//
// Time. Events of the scenario fire by env step: the measurement of step k (0-based, the
// (k+1)-th call of step()) runs under every event with `step ≤ k`. context(), estimate() and
// action_mask() describe the conditions of the step about to be taken.
//
// Speed. The pricer keeps costs per (block kind, strategy) and per pair of layouts under each
// set of conditions it met, so step() is O(blocks) lookups plus the noise draws.
//
// Threads. const methods move the pricer's cursor and fill its caches: use one run per thread
// (clone() for more). Runs on any threads may share all their costs through construction
// (SimOptions::costs).
//
// Lost ranks (core/scenario.h). A plan that trains on a lost rank (a rank_loss event, no
// rank_join yet; data shares, core/data_shares.h, may leave it out) pays a checkpoint restart
// on a spare (RestartModel) in that step's repartition time, after which the spare stands in
// for the rank until it rejoins. Context: each rank's slowdown and liveness.
//
// Noise. Per block one compute factor (fwd and bwd) and one communication factor, one factor
// each for redistribution, LM head and repartition, and one per link class for the measured
// bandwidths: log-normal, mean 1, σ = Scenario::noise (noise.h), seeded by reset(seed).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"
#include "runtime/sim/noise.h"
#include "runtime/sim/plan_pricer.h"

namespace shardgym {

class SimRun : public TrainingRun {
 public:
  // Throws std::invalid_argument if the model, cluster or scenario is inconsistent (unknown
  // link class or rank in an event, a degree that does not divide the world, ...).
  explicit SimRun(const ExperimentSpec& spec, SimOptions options = {});

  std::string backend() const override { return "sim"; }
  const ModelSpec& model() const override { return pricer_.model(); }
  const ClusterSpec& cluster() const override { return pricer_.cost_model().cluster(); }
  const StrategyCatalog& catalog() const override { return pricer_.catalog(); }

  void reset(uint64_t seed, const Plan& initial) override;
  void step_into(const Plan& plan, Measurement& out) override;
  const Plan& plan() const override { return plan_; }
  void context_into(RunContext& out) const override;
  void action_mask_rows_into(int first, int count, uint8_t* out) const override;
  std::optional<Measurement> estimate(const Plan& plan) const override;
  // estimate(plan)'s "ok and not out of memory", from the blocks' memory alone (no times, no
  // transfers): what the masks of share choices ask for every choice at every step.
  bool fits(const Plan& plan) const override;
  bool deterministic() const override { return true; }
  bool cloneable() const override { return true; }
  std::unique_ptr<TrainingRun> clone() const override;
  std::unique_ptr<TrainingRun> clone_holding(const Plan& plan) const override;

  // The cost model under the conditions of the next step (for reports and tests): the whole
  // cluster, for a whole-iteration model; stage_cost_model(s) is what block costs use.
  const CostModel& cost_model() const { return pricer_.cost_model(); }
  const CostModel& stage_cost_model(int stage) const { return pricer_.stage_cost_model(stage); }
  // Stage by stage, block by block: where an iteration of `plan` goes under the conditions of
  // the next step (the plan in force is unchanged). Throws std::invalid_argument if `plan` is
  // not valid here.
  IterationBreakdown breakdown(const Plan& plan) const;
  // Pipeline and micro-batches of the plan in force (m explicit).
  const Pipeline& pipeline() const { return pricer_.pipeline(); }
  // The last priced step's repartition (noise-free; after step(plan): the move into plan).
  const PlanPricer::RepartitionSums& last_repartition() const { return pricer_.last_repartition(); }
  const Scenario& scenario() const { return scenario_; }

 private:
  // Whether a plan with `pipe`'s data shares trains on a lost rank that no spare stands in for
  // (those ranks appended to `ranks`): then the step restarts from a checkpoint.
  bool needs_spare(const Pipeline& pipe, std::vector<int>* ranks = nullptr) const;
  void charge_restart(Measurement& m) const;  // scenario.h RestartModel
  void install(int step);  // the scenario's state at `step`; invalidates the caches if it differs
  void draw_link_measurement();
  // The plan's entries, its pipeline installed (the pricer's resolve against the plan in force).
  std::string resolve(const Plan& plan, std::vector<int>& idx) const {
    return pricer_.resolve(plan, in_force_, idx);
  }
  void hold(const std::vector<int>& idx);  // in_force_ = idx, keys and generation with it

  Scenario scenario_;
  Plan plan_;  // the plan in force (before pricer_: the pricer's first pipeline is its)
  // Pricing fills the pricer's caches (and installs a plan's pipeline while it is priced): a
  // const query of the run still changes them, never what the run's episode holds.
  mutable PlanPricer pricer_;
  int blocks_ = 0;
  int world_ = 0;
  std::vector<int> event_steps_;  // distinct event steps, sorted
  bool rank_events_ = false;      // the scenario has straggler or rank loss events
  double max_slowdown_ = 1;

  // Episode state.
  LogNormalNoise noise_;
  int step_ = 0;
  PlanEntries in_force_;  // the entries of plan_
  std::vector<double> measured_link_;
  std::vector<uint8_t> lost_;  // per rank, under the conditions installed
  bool any_lost_ = false;
  std::vector<uint8_t> replaced_;  // per rank: a spare stands in for the lost rank (restart paid)
  std::vector<int> spare_scratch_;
  std::vector<int> scratch_;               // step()'s entries
  mutable std::vector<int> fits_idx_;      // fits()'s, kept to spare an allocation a call
  mutable std::vector<int> before_stage_;  // block stages before the plan being resolved
};

}  // namespace shardgym
