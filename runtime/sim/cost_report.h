// CostReport: where one plan's time, bytes, memory and energy go, block by block, under the
// simulator's cost model (`shardgym cost CONFIG --plan PLAN [--json]`).
//
// Plain data so that a CLI, a test or a notebook can read it; to_json / to_table render it.
// All figures are noise-free, per iteration, and per rank unless the name says otherwise.
// Block figures are the block's stage's cost model at one micro-batch, times the
// micro-batches (as SimRun charges them); the stages say how the schedule joins them.
//
//   SimRun run(spec);
//   CostReport r = make_cost_report(run, Plan::parse("uniform:tp1d(t=8)", run.model().num_blocks()));
//   std::cout << to_table(r);
#pragma once

#include <string>
#include <vector>

#include "runtime/core/experiment_spec.h"
#include "runtime/core/plan.h"
#include "runtime/sim/sim_run.h"

namespace shardgym {

struct CollectiveLine {
  std::string what;  // "attn.out g", "grad sync", ...
  std::string op;    // all_reduce | all_gather | reduce_scatter
  std::string axis;  // tp | d1 | d2 | dp
  int group_size = 1;
  bool forward = true;
  double elements = 0;        // the full tensor X
  double bytes_per_rank = 0;  // sent by each rank (ring)
  double time_s = 0;          // slowest group
};

struct BlockReport {
  int block = 0;
  int stage = 0;         // pipeline stage
  std::string kind;      // attention | mlp
  std::string strategy;  // Strategy::to_string
  double flops_per_rank = 0;
  double fwd_s = 0, bwd_s = 0;   // compute, slowest rank
  double tp_comm_s = 0;          // tensor-parallel collectives, before overlap
  double grad_sync_s = 0;        // data-parallel gradient all-reduce
  double comm_s = 0;             // exposed: after chunk overlap, + grad sync
  double redistribution_s = 0;   // activations into this block from the previous one (fwd+bwd)
  double comm_bytes_per_rank = 0;
  double state_bytes = 0;        // params + grads + optimizer state
  double activation_bytes = 0;
  double energy_j = 0;           // idle share + busy + links, whole world
  std::vector<CollectiveLine> collectives;
};

// One pipeline stage (a plan without `@pp` has one, holding every block and rank).
struct StageReport {
  int stage = 0;
  int first_block = 0, blocks = 0, first_rank = 0, ranks = 0;
  double micro_batch_s = 0;  // one micro-batch through the stage (LM head on the last)
  double host_s = 0;         // its host's time to issue one micro-batch (a lower bound of it)
  double compute_s = 0;      // Σ its blocks' fwd + bwd, whole iteration
  double comm_s = 0;         // Σ its blocks' exposed TP communication, whole iteration
  double grad_sync_s = 0, param_gather_s = 0, optimizer_s = 0;  // before overlap
  double tail_s = 0;         // what of those stays exposed after the schedule
  double in_flight = 0;      // micro-batches of activations held at the peak
  double peak_memory_bytes = 0, capacity_bytes = 0;
};

struct CostReport {
  std::string model, cluster, plan, calibration;  // calibration: the efficiency table's source
  std::string measured_calibration;  // cluster.calibration's file ("" = none)
  int world = 0;
  int stages = 1, micro_batches = 1, virtual_stages = 1;
  std::string schedule;          // gpipe | 1f1b | interleaved
  double schedule_s = 0;         // all micro-batches through the stages, bubble included
  double bubble_fraction = 0;    // of equal stages: (p−1)/(m·v + p − 1)
  double p2p_s = 0;              // what stage-to-stage transfers add to the schedule
  double tail_s = 0;             // slowest stage's exposed DP work + embedding/head sync
  double step_latency_s = 0;     // one iteration (as SimRun::estimate)
  double compute_s = 0;          // Σ blocks fwd + bwd (all stages)
  double comm_s = 0;             // Σ blocks exposed TP communication + gradient reduction
  double redistribution_s = 0;   // Σ block boundaries + last block → LM head
  double head_s = 0;             // LM head compute (all micro-batches) + its gradient sync
  double repartition_s = 0;      // from the run's current plan to this one
  double repartition_bytes = 0;  // received, all ranks
  double repartition_peak_bytes = 0;  // memory in transit, the largest rank (layout.h)
  double energy_j = 0;
  double tokens = 0;
  double peak_memory_bytes = 0;  // per rank
  double memory_capacity = 0;    // smallest device
  bool oom = false;
  std::vector<StageReport> stage_reports;
  std::vector<BlockReport> blocks;
};

// Under the run's current conditions; repartition from the run's current plan.
// Throws std::invalid_argument if the plan is not valid for the model and world.
CostReport make_cost_report(const SimRun& run, const Plan& plan);
// A fresh run of the experiment at step 0.
CostReport make_cost_report(const ExperimentSpec& spec, const Plan& plan);

std::string to_json(const CostReport& report);
// A fixed-width table; with `collectives`, each block's collectives are listed below it.
std::string to_table(const CostReport& report, bool collectives = true);

}  // namespace shardgym
