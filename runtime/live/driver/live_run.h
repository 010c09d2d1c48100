// LiveRun: the TrainingRun that trains for real (env id "shardgym/TPLive-v0").
//
// P ranks (threads of this process over a HashStore, or processes over a TCPStore: LiveSpec
// launch) each hold a RankTrainer (runtime/live/tp) and train a byte-level GPT on the text
// corpus (datasets/text). LiveRun is the driver: it never computes, it posts one command per
// call (reset / step / eval) to every rank and folds their reports into a Measurement:
//   step_latency_s   slowest rank's training iteration, wall clock        ("wallclock")
//   repartition_*    slowest rank's time, bytes received summed over ranks
//   block_*_s        per block, the critical rank's (fold_rank_reports)
//   peak_memory      per rank, counting allocator keyed by rank           ("allocator")
//   energy_j         RAPL when readable, else the device power model over the measured
//                    busy (thread CPU) time of each rank                  ("rapl" | "model")
// Live figures are neither deterministic nor portable, and a live job cannot be cloned.
//
// Failures: a plan that is not shape-valid for the model, or whose blocks cannot split the
// global batch or its micro-batches, is rejected before any rank sees it (reset:
// std::invalid_argument; step: ok = false). A rank that throws or stalls stops every rank
// within the timeout; step() returns ok = false with the error naming the rank and the
// operation, all ranks are joined (or killed), and the run stays stopped until the next
// reset().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"
#include "runtime/core/live_memory.h"
#include "runtime/live/driver/meters.h"
#include "runtime/live/driver/rank_protocol.h"
#include "runtime/live/launch/world_limits.h"

namespace shardgym::live {

class RankDriver;  // driver/rank_driver.h: the ranks as threads or as processes

// Why live.extra.fault cannot be injected in this run ("" if it can, or if there is none):
// bad syntax (parse_fault), `exit` with thread ranks, `nostart` with process ranks, or a rank
// outside live.ranks. LiveRun refuses such a spec; the env registration checks it at load.
std::string why_fault_invalid(const LiveSpec& live);
// "" when the live ranks' model (tp/reference_gpt.h: GPT's blocks and Llama's, every trait of
// model_spec.h; dropout is never applied) can run the config's; else why not: rotary
// embeddings with an odd head dimension (the simulator prices them, docs/configs.md "Model
// shapes").
std::string why_model_not_live(const ModelSpec& model);

// Folds one iteration's rank reports into `m`: the step latency is the slowest rank's step,
// repartition time and peak the slowest rank's, bytes summed, peak memory per rank. Block
// figures and the optimizer step are those of the critical rank (the one whose step is the
// step latency), so that they, with the rest of that rank's step, add up to the latency.
// Ranks that report fewer than `blocks` block times are left out of that choice.
void fold_rank_reports(const std::vector<RankReport>& reports, int blocks, Measurement& m);

class LiveRun : public TrainingRun {
 public:
  // Validates the experiment (world = cluster size = live.ranks, vocab ≥ 256, precision
  // float32|float64, launch threads|processes); starts no rank. Throws std::invalid_argument.
  explicit LiveRun(const ExperimentSpec& spec);
  ~LiveRun() override;

  std::string backend() const override { return "live"; }
  const ModelSpec& model() const override { return config_.model; }
  const ClusterSpec& cluster() const override { return cluster_; }
  const StrategyCatalog& catalog() const override { return catalog_; }

  // (Re)starts the ranks and builds the model from `seed`. Throws std::invalid_argument for
  // an invalid plan (no rank started), std::runtime_error if the ranks fail to start.
  void reset(uint64_t seed, const Plan& initial) override;
  // Repartitions to `plan` and trains live.warmup_iterations + live.iterations iterations;
  // the figures are the medians of the measured ones (the repartition: the first command's).
  void step_into(const Plan& plan, Measurement& out) override { out = train_step(plan); }
  const Plan& plan() const override { return plan_; }
  void context_into(RunContext& out) const override { out = current_context(); }
  void action_mask_rows_into(int first, int count, uint8_t* out) const override {
    write_mask_rows(first, count, out, [this](int b) { return mask_row(b); });
  }
  std::optional<Measurement> estimate(const Plan&) const override { return std::nullopt; }
  // why_invalid(plan) is empty and the memory estimate fits the smallest device.
  bool fits(const Plan& plan) const override;
  bool deterministic() const override { return false; }

  std::vector<CollectiveTiming> time_collectives(double bytes, int reps) override;
  // Validation loss on the `index`-th validation batch (collective over the ranks).
  // Throws std::runtime_error if the run is stopped or the ranks fail.
  double eval_loss(int index = 0);
  // Empty if `plan` can run: shapes over the whole batch and one pipeline stage
  // (why_live_plan_invalid), global-batch divisibility and the micro-batches
  // (micro_batches()).
  std::string why_invalid(const Plan& plan) const;
  // Micro-batches per training iteration, from the next step() on and kept across reset(),
  // for plans that write no m: each replica's batch runs as m micro-batches with gradient
  // accumulation, one gradient sync and one optimizer step (tp/micro_batches.h). Until it is
  // called (micro_batches() == 0) every plan runs the simulator's count, Megatron-LM's rule
  // (plan_micro_batches). Throws std::invalid_argument (naming m and the local batch) unless
  // m ≥ 1 divides each rank's G/P sequences, which every plan needs: the embedding and LM head
  // are data parallel over all ranks. What depends on the plan (a block's chunks must split its
  // micro-batch) is checked by why_invalid: step() returns ok = false and the action mask
  // leaves such strategies out. A plan that writes m (`@pp(m=4)`) runs its own count.
  void set_micro_batches(int m);
  int micro_batches() const { return micro_batches_; }
  // What a step of `plan` runs: the plan's m if written, else set_micro_batches' m if set,
  // else plan_micro_batches (Megatron-LM's rule, as the simulator).
  int micro_batches_of(const Plan& plan) const;
  const LiveRankConfig& rank_config() const { return config_; }
  bool running() const { return driver_ != nullptr; }
  // Process ids of the rank processes (launch = processes), in rank order; empty otherwise.
  std::vector<int> rank_pids() const;
  const std::string& last_error() const { return last_error_; }

 private:
  Measurement train_step(const Plan& plan);  // step_into's figures
  RunContext current_context() const;
  std::vector<uint8_t> mask_row(int block) const;
  // One training iteration under `plan` (the ranks repartition first if it is new to them).
  Measurement iterate(const Plan& plan);
  std::vector<RankReport> command(RankCommand cmd);  // throws std::runtime_error
  std::string stop_ranks();  // "" or what went wrong (RankDriver::stop)
  // This run's world for launch/world_limits.h, with `memory_per_rank` bytes (0: not checked).
  LiveWorld world_request(double memory_per_rank) const;

  LiveRankConfig config_;
  LiveSpec live_;
  ClusterSpec cluster_;
  Scenario scenario_;  // drawn(): the instance's events (straggler events only; backends/)
  // Each rank's compute stretch at env step `step` from the scenario's straggler events.
  std::vector<double> slowdown_at(int step) const;
  double memory_capacity() const;  // the smallest device's memory, bytes
  StrategyCatalog catalog_;
  PowerModel power_;
  std::string worker_;  // shardgym_rank_worker executable (launch = processes)
  std::string rank_reports_;  // $SHARDGYM_RANK_REPORTS at construction ("" = not written)
  std::unique_ptr<RankDriver> driver_;
  Plan plan_;
  int step_ = 0;
  int seq_ = 0;
  int micro_batches_ = 0;  // 0: derived per plan (plan_micro_batches)
  std::string last_error_;
};

}  // namespace shardgym::live
