// PartitionEnv: the env over any TrainingRun. Owns the episode: applies an action as a new
// plan, asks the run for a Measurement, turns it into observation and raw reward.
//
// Observation layout (float32; observation_parts() is its one source: the spec's named parts,
// the size and observe()'s writes all come from it):
//   per block b (kBlockFeatures): [catalog index / K (1.0 when the strategy is outside the
//     catalog), degree / P, is_tp1d, is_tp2d, sp, chunks > 1, recompute,
//     fwd_s / ref, bwd_s / ref, comm_s / ref]  (ref: the block's time under the initial plan
//     at reset, so 1.0 = unchanged; where that reference is 0, the block's total reference
//     time is used instead)
//   global (kGlobalFixed): [step / steps_per_episode, phase / num_phases, seq_factor,
//     max_compute_slowdown, peak memory / capacity, latency / initial latency]
//   then L link classes: measured bandwidth / nominal.
//   Phase, factors and bandwidths are run.context(): the conditions of the step to come.
//   With p > 1 pipeline stages, then 2p − 1 more (pipeline_action.h): the p − 1 stage
//   boundaries (first layer of stage i+1 / layers), each stage's peak memory / capacity.
//   With p = 1 the layout is exactly the one above.
//   With `data_shares: {groups: n}`, a "shares" part before the pipeline part: per share group
//   its data share / the even share, its speed (slowest rank's device peak over the fastest
//   device's, / its slowdown) and 1 when it can
//   train (0: a rank of it is lost and no spare stands in) (env/share_action.h).
// Every entry is ≥ 0 (observation space Box(0, inf)). After a failed step the measured
// entries keep their previous values.
// Raw reward: −(w_lat·(latency + repartition)/tokens·1e6 + w_mem·peak/capacity
//               + w_energy·energy/tokens); NormalizeReward turns it into "1.0 = Megatron".
// A failed step (Measurement::ok == false), and a step whose plan ran out of memory (ok with
// oom: the run installed it, so no action is valid any more), have reward 0, truncated = true
// and info.error set; step() then throws std::logic_error until reset(). reset() measures one
// iteration of the initial plan (the reference; returned as info.measurement).
//
// Action: B catalog indices, then with p > 1 stages or data shares the plan-level component
// (pipeline_action.h, share_action.h: keep, the 2p − 2 boundary moves, the share choices):
// MultiDiscrete(nvec = [K]*B (+ [M])). The mask is the concatenation
// of the components' masks (sb3-contrib's MaskableMultiDiscrete layout): mask[b·K + k] for the
// blocks, then mask[B·K + c] for the pipeline choices. Choice 0 (keep) is always allowed; a
// move is allowed when the plan in force with that move alone is valid and fits memory
// (plan_fits). As for blocks, each component is checked with the others as they are, with one
// exception: a share choice is also allowed when the blocks in force span its share groups but
// narrower blocks would admit it (share_choice_admissible); the step then narrows the blocks
// that span a group (share_action.h), so that blocks and shares move together in one choice.
// Components each allowed with the others as they are need not fit together (two blocks that
// each keep more activations): a step that changes more than one component is checked as a
// whole (plan_fits) and, where it does not fit but the plan in force does, refused: the plan
// in force stays and is measured (info "step_refused"), as a controller that checks a plan's
// memory before moving any weight would refuse it, instead of running the job out of memory.
//
// The action mask (B·K bytes) sits on the hot path, so it is cached row by row and rows are
// recomputed only after the plan in force or the run's conditions (phase, sequence factor,
// memory capacity) change. step() computes just the rows of the blocks whose strategy the
// action changes; a block kept as it is is checked against the catalog's shape mask only.
// mask[b][current_b] = 0 says the plan in force will not fit the next step (by the
// TrainingRun contract, the same for every block): keeping it is allowed, and the step then
// runs out of memory and ends the episode, as it would end the job.
// PartitionEnv tracks the plan through its own reset/step: after driving the run directly
// (env.run().step(...)), call reset().
//
// Length: the observation's layout is documented field by field at its definition.
#pragma once

#include <memory>

#include "env/env.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"

namespace shardgym {

class PartitionEnv : public Env {
 public:
  static constexpr int kBlockFeatures = 10;
  static constexpr int kGlobalFixed = 6;

  PartitionEnv(std::string id, std::unique_ptr<TrainingRun> run, const ExperimentSpec& spec);
  // The layout above as named parts (EnvSpec::observation_parts): "blocks" (B, kBlockFeatures),
  // "global" (kGlobalFixed), "links" (L), with `groups` > 0 "shares" (groups, 3), and with
  // `moves` > 0 pipeline choices, "pipeline" (moves = 2p − 1).
  static std::vector<ObservationPart> observation_parts(int blocks, int links, int moves,
                                                        int groups = 0);

  const EnvSpec& spec() const override { return spec_; }
  ResetResult reset(std::optional<uint64_t> seed = std::nullopt) override;
  void step_into(const Action& action, StepResult& out) override;
  void action_mask_into(uint8_t* out, size_t size) const override;
  TrainingRun& run() override { return *run_; }
  const TrainingRun& run() const override { return *run_; }
  int elapsed_steps() const override { return steps_; }

  const ExperimentSpec& experiment() const { return experiment_; }
  // Size and range are checked (std::invalid_argument naming the block); the mask is not.
  // The pipeline component applies to the pipeline in force.
  Plan plan_from_action(const Action& action) const;
  // Throws std::invalid_argument if a block's strategy is not in the catalog, or if the plan's
  // pipeline is not the one in force or one boundary move away from it.
  Action action_from_plan(const Plan& plan) const;
  int stages() const { return stages_; }
  const Plan& initial_plan() const { return initial_plan_; }
  const Measurement& reference() const { return reference_; }

 private:
  static constexpr int kStrategyFeatures = 7;  // the static part of a block's features

  void check_action(const Action& action) const;  // size, range, mask
  void require_started() const;
  void ensure_row(int b) const;
  void ensure_pipeline_row() const;
  void invalidate_mask(const RunContext& ctx);
  // The pipeline (with its shares) after plan-level choice `c` from the one in force; throws
  // std::out_of_range outside [0, moves_).
  Pipeline apply_plan_choice(int c) const;
  std::vector<double> share_speeds(const RunContext& ctx) const;
  void sync_indices_from_plan();
  // step_into's parts: a share choice the step's blocks do not admit (pending_), and the
  // info scalars.
  void admit_share_choice(bool& refused, bool& narrowed);
  bool refuse_joint_misfit(const Action& action);
  // Which of a step's components were refused or narrowed (info scalars of the same names).
  struct Admitted {
    bool plan_choice_refused = false, blocks_narrowed = false, step_refused = false;
  };
  void write_scalars(const Measurement& m, const Admitted& a, StepResult& r) const;
  void strategy_features(const Strategy& s, int index, float* out) const;
  void observe(const Measurement& m, const RunContext& ctx, Observation& obs);
  double raw_reward(const Measurement& m, const RunContext& ctx) const;
  double capacity(const RunContext& ctx) const;

  EnvSpec spec_;
  std::unique_ptr<TrainingRun> run_;
  ExperimentSpec experiment_;
  Plan initial_plan_;
  Measurement reference_;  // measurement of the initial plan at reset
  uint64_t next_seed_ = 0;
  int steps_ = 0;
  bool started_ = false;
  std::string failure_;  // set when the episode ended with a failed step

  int blocks_ = 0, choices_ = 0, links_ = 0, world_ = 1;
  int stages_ = 1, moves_ = 0;  // p of the initial plan; plan_component_choices(p, groups)
  int pp_moves_ = 0;            // pipeline_choices(p): the pipeline's part of them
  int groups_ = 0;              // data-share groups (0: no share choices)
  Pipeline pipeline_;           // the pipeline in force
  // K × kStrategyFeatures, immutable and shared by the envs whose tables come out the same
  // (a vector env's: one copy read by all, instead of a 4.8 KB table each at K = 172).
  std::shared_ptr<const std::vector<float>> catalog_features_;
  std::vector<double> ref_inv_;    // B × 3: 1 / reference (fwd, bwd, comm)
  std::vector<uint8_t> shape_ok_;  // 2 × K: the catalog's attention and MLP shape masks
  Plan pending_;                   // reused buffer for the requested plan
  bool pending_in_force_ = false;  // pending_ is the plan in force (current_)
  std::vector<int32_t> current_;   // catalog index per block of the plan in force, -1
  // The measured entries of the last observation (per block fwd, bwd, comm; peak memory and
  // latency; with pipelines each stage's peak), in that order: a failed step keeps them. Kept
  // apart so that a step does not copy its whole observation (2.6 KB at 64 blocks) aside.
  std::vector<float> last_measured_;
  int dim_ = 0;     // observation size
  // Where each part of the observation starts (observation_parts(); -1: absent).
  int64_t at_global_ = 0, at_links_ = 0, at_shares_ = -1, at_pipeline_ = -1;
  RunContext ctx_;  // the run's context after the last reset or step

  mutable std::vector<uint8_t> mask_;  // B × K, row b valid if row_epoch_[b] == epoch_
  mutable std::vector<uint64_t> row_epoch_;
  mutable uint64_t pipeline_epoch_ = 0;  // the pipeline row (mask_'s tail) is valid at epoch_
  mutable uint64_t direct_epoch_ = 0;    // epoch_ of action_mask_into's last uncached call
  uint64_t epoch_ = 1;
  int mask_phase_ = -1;  // conditions the cached rows were computed under
  double mask_seq_factor_ = 0, mask_capacity_ = 0;
  std::vector<uint8_t> mask_alive_;  // rank liveness the cached rows were computed under
};

}  // namespace shardgym
