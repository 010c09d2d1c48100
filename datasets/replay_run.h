// ReplayRun: a recorded trace played back as a TrainingRun (backend "replay"), registered as
// `shardgym/TPReplay-v0` (PartitionEnv over a ReplayRun; the trace is ExperimentSpec::
// replay_trace). Offline evaluation, analysis pipelines and tests get the recorded figures
// without the cluster that produced them.
//
// A trace only knows what was measured, so the contract is strict and says so:
//  - The spec gives model, cluster and catalog; the trace's blocks B and ranks P must match
//    them, and every recorded strategy must be in the spec's catalog (else
//    std::invalid_argument naming both sides).
//  - reset(seed, initial) picks the first complete episode recorded with `seed`, or, when
//    none was, complete episode number (seed mod E). Any shape-valid `initial` is accepted.
//  - The first step() after reset is PartitionEnv's reference iteration: it returns the
//    measurement recorded at reset when `plan` is the recorded initial plan. Every later
//    step() returns the next recorded step's measurement when `plan` equals the plan recorded
//    for it. A different plan gets ok = false with an error naming the episode, step, first
//    differing block and both strategies; the run stays on its plan and the episode has
//    diverged (later steps fail too, until reset). Past the recording's end: ok = false.
//  - action_mask(block): the catalog's shape mask (memory fit cannot be known offline).
//    next_plan() says what the recording does next, so a driver can follow it.
//  - fits(plan): whether the plan is valid (memory fit cannot be known offline).
//  - estimate(plan): the recorded next measurement if `plan` is the recorded next plan, the
//    reset measurement if it is the recorded initial plan, else nullopt. These are recorded
//    (noisy) figures, not noise-free ones.
//  - context() replays the spec's scenario (phase, link factors, sequence, stragglers) at the
//    run's step counter, which counts step() calls since reset (reference included).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datasets/trace.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"

namespace shardgym {

class ReplayRun : public TrainingRun {
 public:
  // Reads every complete episode of `trace_path` (std::runtime_error if unreadable,
  // std::invalid_argument if it does not fit the spec or has no complete episode).
  ReplayRun(const ExperimentSpec& spec, const std::string& trace_path);

  std::string backend() const override { return "replay"; }
  const ModelSpec& model() const override { return spec_.model; }
  const ClusterSpec& cluster() const override { return spec_.cluster; }
  const StrategyCatalog& catalog() const override { return catalog_; }

  void reset(uint64_t seed, const Plan& initial) override;
  void step_into(const Plan& plan, Measurement& out) override { out = replay_step(plan); }
  const Plan& plan() const override { return plan_; }
  void context_into(RunContext& out) const override { out = current_context(); }
  void action_mask_rows_into(int first, int count, uint8_t* out) const override {
    write_mask_rows(first, count, out, [this](int b) { return mask_row(b); });
  }
  std::optional<Measurement> estimate(const Plan& plan) const override;
  // Whether `plan` is valid for the model and world: memory fit cannot be known offline, as
  // for the mask (the recording says what ran); not "only the recorded plans fit", which
  // would make the env refuse the steps a replay must fail on.
  bool fits(const Plan& plan) const override {
    return plan.validate(spec_.model, spec_.cluster.world_size()).empty();
  }
  bool deterministic() const override { return true; }
  bool cloneable() const override { return true; }
  std::unique_ptr<TrainingRun> clone() const override;

  // The plan the recording uses at the next step() (nullopt past the end).
  std::optional<Plan> next_plan() const;
  // Recorded steps left in the episode (the reference iteration not counted).
  int steps_left() const;
  int num_episodes() const { return static_cast<int>(episodes_->size()); }
  const TraceEpisode& episode() const { return episodes_->at(current_).data; }
  const TraceEpisode& recorded(int i) const { return episodes_->at(i).data; }
  bool diverged() const { return !divergence_.empty(); }

 private:
  Measurement replay_step(const Plan& plan);  // step_into's figures
  RunContext current_context() const;
  std::vector<uint8_t> mask_row(int block) const;
  struct Recorded {
    TraceEpisode data;
    Plan initial_plan;
    std::vector<Plan> plans;  // plan in force after each step
  };

  Measurement fail(const std::string& why) const;

  ExperimentSpec spec_;
  std::string path_;
  StrategyCatalog catalog_;
  std::shared_ptr<const std::vector<Recorded>> episodes_;  // shared by clones
  size_t current_ = 0;
  int calls_ = 0;  // step() calls since reset; 0 = the reference iteration is next
  Plan plan_;
  std::string divergence_;
};

}  // namespace shardgym
