// Wrappers (Gymnasium style): each holds the inner env and forwards what it does not change.
//   TimeLimit(max_steps)   truncated = true once max_steps steps have been taken; stepping
//                          past that throws std::logic_error until reset()
//   NormalizeReward        reward = Σ w_i · baseline_i / value_i / Σ w_i over latency per token
//                          ((iteration + repartition) / tokens), peak memory of the fullest
//                          rank and energy per token; baseline = the static plan (Megatron)
//                          under the same conditions (1.0 = as good as Megatron). The baseline
//                          is run.estimate(plan) taken just before each step (the run's
//                          conditions for that step; recomputed only when they change), else
//                          one measured iteration of the baseline plan at reset. Its latency
//                          excludes repartition (a static plan never moves). A figure that is
//                          0 counts as 1.0; a failed step scores 0.
//   IncrementalAction      action space Discrete(1 + B·K): 0 = no-op, else change one block
//                          (env/incremental_action.h)
//   CountSteps             adds 1 to a shared counter per step (what a learner, its searches
//                          included, costs in env steps: bench learn, train)
//   RecordTrace            hands every reset/step to a TraceSink (datasets/ writes HDF5);
//                          put it inside IncrementalAction so traces hold per-block actions
// Usual order (make_env): TimeLimit(NormalizeReward(PartitionEnv)).
// Wrappers that need the episode seed resolve it (explicit, else previous + 1, first 0 — as
// PartitionEnv does) and pass it down explicitly, so the whole stack agrees on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "env/env.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"

namespace shardgym {

class Wrapper : public Env {
 public:
  explicit Wrapper(std::unique_ptr<Env> inner) : inner_(std::move(inner)) {}
  const EnvSpec& spec() const override { return inner_->spec(); }
  ResetResult reset(std::optional<uint64_t> seed = std::nullopt) override {
    return inner_->reset(seed);
  }
  void step_into(const Action& action, StepResult& out) override {
    inner_->step_into(action, out);
  }
  void action_mask_into(uint8_t* out, size_t size) const override {
    inner_->action_mask_into(out, size);
  }
  TrainingRun& run() override { return inner_->run(); }
  const TrainingRun& run() const override { return inner_->run(); }
  int elapsed_steps() const override { return inner_->elapsed_steps(); }
  Env& inner() { return *inner_; }

 protected:
  std::unique_ptr<Env> inner_;
};

class TimeLimit : public Wrapper {
 public:
  TimeLimit(std::unique_ptr<Env> inner, int max_steps);
  const EnvSpec& spec() const override { return spec_; }
  void step_into(const Action& action, StepResult& out) override;

 private:
  EnvSpec spec_;
  int max_steps_;
};

// Counts steps into a counter it shares (atomic: VectorEnv steps its envs on threads). Wrap
// every env a learner can reach, and its own searches and restarts are counted with its
// training steps.
class CountSteps : public Wrapper {
 public:
  using Counter = std::shared_ptr<std::atomic<int64_t>>;
  CountSteps(std::unique_ptr<Env> inner, Counter counter)
      : Wrapper(std::move(inner)), counter_(std::move(counter)) {}
  void step_into(const Action& action, StepResult& out) override {
    counter_->fetch_add(1, std::memory_order_relaxed);
    inner_->step_into(action, out);
  }

 private:
  Counter counter_;
};

class NormalizeReward : public Wrapper {
 public:
  NormalizeReward(std::unique_ptr<Env> inner, RewardSpec weights, Plan baseline);
  ResetResult reset(std::optional<uint64_t> seed = std::nullopt) override;
  void step_into(const Action& action, StepResult& out) override;

 private:
  // Figures the reward compares: latency per token, peak memory, energy per token.
  struct Figures {
    double latency = 0, memory = 0, energy = 0;
  };
  const Figures& baseline_figures();  // refreshes the estimate when conditions changed
  double normalize(const Measurement& m, const Figures& base) const;

  RewardSpec weights_;
  Plan baseline_;
  Measurement baseline_measured_;  // fallback when the run cannot estimate (live)
  uint64_t next_seed_ = 0;
  bool estimates_ = false;         // the run can estimate the baseline
  bool have_key_ = false;
  RunContext key_;                 // conditions of the cached estimate (step ignored)
  RunContext now_;                 // the run's context, refilled at each step
  Figures base_;
  double first_step_s_ = 0;  // Megatron-LM's step time at the episode's first step (time_saved)
};

// Receives every transition; implemented by datasets::TraceWriter.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void begin_episode(const EnvSpec& spec, uint64_t seed, const ResetResult& r) = 0;
  virtual void record_step(const Action& action, const StepResult& r) = 0;
  virtual void end_episode() = 0;  // flushes
};

class RecordTrace : public Wrapper {
 public:
  RecordTrace(std::unique_ptr<Env> inner, std::shared_ptr<TraceSink> sink);
  ~RecordTrace() override;
  ResetResult reset(std::optional<uint64_t> seed = std::nullopt) override;
  // Records the whole Info: out.lean_info is ignored.
  void step_into(const Action& action, StepResult& out) override;

 private:
  std::shared_ptr<TraceSink> sink_;
  bool open_ = false;
  uint64_t seed_counter_ = 0;  // next seed when reset() gets none
};

}  // namespace shardgym
