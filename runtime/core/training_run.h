// TrainingRun: the job being tuned, seen from the env (docs/design.md §1).
//
// One per env. `SimRun` (runtime/sim) computes a Measurement from the cost model, `LiveRun`
// (runtime/live) trains for real on c10d ranks, `ReplayRun` (datasets) plays a trace back.
// The env owns the episode bookkeeping (rewards, termination); the run owns the job state.
//
// One virtual per operation, writing into the caller's buffers (an env steps thousands of
// times a second): step_into, context_into, action_mask_rows_into; step(), context(),
// action_mask() and action_mask_into() are the value-returning and one-row forms over them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/catalog.h"
#include "runtime/core/cluster_spec.h"
#include "runtime/core/measurement.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"
#include "runtime/core/scenario.h"

namespace shardgym {

// What the run knows of its surroundings at the current step (global observation features).
struct RunContext {
  int step = 0;                        // env steps taken this episode
  int phase = 0;                       // scenario phase (0 before the first event)
  int num_phases = 1;
  std::vector<double> link_bw_factor;  // per ClusterSpec::links entry, as measured / nominal
  double seq_factor = 1.0;             // current seq length / configured one
  double max_compute_slowdown = 1.0;   // slowest rank's slowdown (stragglers)
  // Per rank, where the backend knows them (sim, replay; empty elsewhere, and where every
  // rank is nominal): compute slowdown (1 = nominal) and whether the rank can train (0: lost,
  // and no spare stands in for it).
  std::vector<double> rank_slowdown;
  std::vector<uint8_t> rank_alive;
  double memory_capacity = 0;          // smallest device memory, bytes
};

class TrainingRun {
 public:
  virtual ~TrainingRun() = default;

  virtual std::string backend() const = 0;  // "sim" | "live" | "replay"
  virtual const ModelSpec& model() const = 0;
  virtual const ClusterSpec& cluster() const = 0;
  virtual const StrategyCatalog& catalog() const = 0;

  // Begins an episode: seeds noise and data, installs `initial` without charging a
  // repartition. Throws std::invalid_argument if `initial` is not valid.
  virtual void reset(uint64_t seed, const Plan& initial) = 0;
  // Moves the job to `plan` (blocks whose strategy is unchanged stay put; the bytes that move
  // are charged to this step) and trains one iteration. A failure comes back as
  // `ok = false` with the error set; it does not throw.
  // Written into `out`, reusing its buffers.
  virtual void step_into(const Plan& plan, Measurement& out) = 0;
  Measurement step(const Plan& plan) {
    Measurement m;
    step_into(plan, m);
    return m;
  }
  virtual const Plan& plan() const = 0;
  virtual void context_into(RunContext& out) const = 0;
  RunContext context() const {
    RunContext c;
    context_into(c);
    return c;
  }

  // Mask rows [first, first + count) as 0/1, row b at out + (b − first)·K (K = catalog size):
  // mask[k] = 1 if catalog entry k may be chosen for block b now: shape-valid, and the plan
  // with that block changed (the others as they are) fits every rank's memory. An env writes
  // the whole mask after a change in one call. Throws std::out_of_range for a block outside
  // the model.
  virtual void action_mask_rows_into(int first, int count, uint8_t* out) const = 0;
  void action_mask_into(int block, uint8_t* out) const { action_mask_rows_into(block, 1, out); }
  std::vector<uint8_t> action_mask(int block) const;

  // Noise-free cost of `plan` under the current conditions without running it, where the
  // backend can tell (sim: yes; live: no). Used for baselines and oracles.
  virtual std::optional<Measurement> estimate(const Plan& plan) const = 0;
  // Whether `plan` is valid here and fits every rank's memory under the conditions of the next
  // step. The default asks estimate(); a backend that cannot estimate times (live) still
  // knows what it can run.
  virtual bool fits(const Plan& plan) const;

  // Same seed and actions give bit-identical measurements.
  virtual bool deterministic() const = 0;
  // A live job cannot be copied; callers check before calling clone().
  virtual bool cloneable() const { return false; }

  // Live runs: every collective the trainer uses (all-reduce, all-gather, reduce-scatter) on
  // every group its strategies form, then the first stage boundary of every pipeline the
  // world can form (its ranks' sends and receives to their counterparts, posted together),
  // `bytes` per rank, the median of `reps` after one warm-up (calibration's microbenchmarks,
  // docs/calibration.md). Empty where not measured (the simulator, replay). Needs a reset run.
  struct CollectiveTiming {
    std::string op;          // "all_reduce" | "all_gather" | "reduce_scatter" | "p2p"
    std::vector<int> group;  // sorted global ranks (p2p: two stages of S, rank r with r ± S)
    double bytes = 0;        // per rank, the input
    double seconds = 0;      // slowest member's median
  };
  virtual std::vector<CollectiveTiming> time_collectives(double /*bytes*/, int /*reps*/) {
    return {};
  }
  virtual std::unique_ptr<TrainingRun> clone() const;  // throws std::logic_error if !cloneable
  // A clone whose plan in force is `plan`, as if it had always run it (no repartition, same
  // step, conditions and noise): the planners search plans around a pipeline or data shares
  // other than the run's own. Throws std::logic_error if !cloneable, std::invalid_argument if
  // `plan` is not valid here.
  virtual std::unique_ptr<TrainingRun> clone_holding(const Plan& plan) const;

 protected:
  // For action_mask_rows_into of runs that compute one row at a time: writes row(b) for each
  // block of [first, first + count) as 0/1, checking each row's size against the catalog.
  void write_mask_rows(int first, int count, uint8_t* out,
                       const std::function<std::vector<uint8_t>(int)>& row) const;
};

// run.fits(plan), as a free function.
inline bool plan_fits(const TrainingRun& run, const Plan& plan) { return run.fits(plan); }

// Megatron-LM users' pipeline rule: tensor parallelism within a node, then the fewest pipeline
// stages with which the model fits (Narayanan et al. 2021, §3.3: "use tensor parallelism up to
// the GPUs in a server, then pipeline parallelism across servers"). Returns make(p) for the
// smallest p in [min_stages, max_stages] that divides the world and the layers and whose plan
// fits `run`; make(min_stages) when none does or the run cannot estimate.
Plan fewest_fitting_stages(const TrainingRun& run, int min_stages, int max_stages,
                           const std::function<Plan(int)>& make);

// resolve_plan, with "megatron" / "megatron-sp" given their pipeline by fewest_fitting_stages
// (max_stages 1: exactly resolve_plan). The env, NormalizeReward's baseline and the static
// agents resolve these names through here.
Plan resolve_baseline_plan(const std::string& text, const TrainingRun& run, int min_stages,
                           int max_stages);

// Failures found where nothing can throw (a run's destructor that had to kill a stalled
// rank), kept for the process's exit status: the command line's main() takes them and fails
// the command. Thread-safe.
void note_late_failure(const std::string& what);
std::vector<std::string> take_late_failures();

}  // namespace shardgym
