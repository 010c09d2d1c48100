// `shardgym bench pipeline`: the pipeline bubble of the live runtime against the schedule's
// formula (docs/benchmarks.md, "Pipeline bubble on live ranks").
//
// P rank threads, one pipeline stage each (plan uniform:dp@pp(p=P, m, schedule)), train the
// bench model for `iters` timed iterations after `warmup`, for every m and schedule asked
// for. Per stage, its compute per micro-batch c_s is the blocks' forward and backward time on
// its rank (BlockTimes, waits excluded) over m. The schedule's time is the step's wall clock
// less the optimizer step; the bubble measured is the share of it the slowest stage does not
// compute: 1 − m · max_s c_s / schedule. Against it: (p − 1) / (m + p − 1), the bubble of
// 1F1B and GPipe with equal stages and free transfers (Narayanan et al. 2021, §2.2). The
// difference is the transfers' time and the stages' inequality, both of which the formula
// leaves out.
//
// One stage per rank: with P ranks on fewer cores, stages would wait for a core rather than for
// their neighbour, and the bubble would say nothing about the schedule (the command warns).
//
// Beside each row, the same pipeline in Python PyTorch eager (bench_pipeline_eager.py: P
// processes over Gloo, the same GPT, schedule and transfers, AdamW and clipping), with the C++
// side's float32 products (oneDNN through ctypes; the system BLAS of Debian's torch is far
// slower, docs/benchmarks-live.md), run back to back in one call: C++ / eager step time.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/model_spec.h"

namespace shardgym::live {

struct BenchPipelineOptions {
  ModelSpec model;     // default: BenchLiveOptions::bench_live_model()
  int ranks = 2;       // = stages
  int warmup = 2;
  int iters = 5;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<std::string> schedules = {"1f1b", "gpipe"};
  bool run_python = true;
  std::string python = "/usr/bin/python3";
  BenchPipelineOptions();
};

struct BenchPipelineRow {
  std::string schedule;
  int micro_batches = 0;
  double step_s = 0;        // median wall clock of the slowest rank
  double optimizer_s = 0;   // median, slowest rank
  double stage_compute_s = 0;  // max over stages of the compute per micro-batch
  double bubble = 0;        // measured: 1 − m · stage_compute / (step − optimizer)
  double formula = 0;       // (p − 1) / (m + p − 1)
  double spread = 0;        // (max − min) / median of the step over the timed iterations
  double eager_step_s = 0;  // the eager pipeline's median (0: not run)
  std::vector<double> steps;  // the slowest rank's wall clock, every timed iteration
};

struct BenchPipelineResult {
  int ranks = 0;
  unsigned cores = 0;  // std::thread::hardware_concurrency
  std::string model;
  std::vector<BenchPipelineRow> rows;
  std::string python_error;  // why the eager side has no figures
};

BenchPipelineResult bench_pipeline(const BenchPipelineOptions& options);
std::string bench_pipeline_to_text(const BenchPipelineResult& r);
std::string bench_pipeline_to_json(const BenchPipelineResult& r);

}  // namespace shardgym::live
