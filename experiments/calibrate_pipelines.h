// The pipeline pass of `calibrate`: the schedule's fill and drain on the live ranks
// (docs/calibration.md, "The schedule's fill and drain"). Internal to calibrate.cpp and the
// calibrate command.
//
// For every stage count p ≥ 2 that divides the world and that the layers allow, the reference
// plan's strategy (the drift reference, the first uniform plan) over each stage's world / p
// ranks, at m = 1, 2 and 4 micro-batches where both runs can train it, under 1F1B and GPipe:
// `uniform:dp@pp(p=2,m=4)` and its kin. Each is measured as the table's plans are (warm-up,
// the median of the iterations, the drift reference before and after it), and its bubble
// is taken as `shardgym bench pipeline` takes it: per stage, its blocks' forward and backward
// time per micro-batch (waits excluded; each block's figures from the slowest rank that ran
// it); the bubble is the share of the schedule (the step less the optimizer step) that the
// slowest stage does not compute, 1 − m · max_s c_s / (step − optimizer). Against it stand
// (p − 1) / (m + p − 1), the bubble of equal stages with free transfers (Narayanan et al. 2021,
// §2.2), and the same figures of the simulator calibrated with the file: how far the
// simulator's pipelines are off on this machine, by m, with nothing but the schedule varied.
#pragma once

#include <string>
#include <vector>

#include "experiments/calibration_file.h"
#include "experiments/calibration_fit.h"
#include "experiments/live_measure.h"

namespace shardgym::detail {

struct PipelinePass {
  std::vector<Plan> plans;                               // those measured
  std::vector<PlanStats> stats;                          // each plan's, times divided as below
  std::vector<CalibrationFile::PipelineTiming> timings;  // the file's rows
  // The boundary walk after them: the first pass plan with 2 stages, its boundary moved one
  // layer, two back, one on, and again the other way (six moves, each entered from the one
  // before; `from` is that plan), for the repartition fit: a move of whole blocks to ranks
  // that held none of them, a change the table's plans never make. Empty where no 2-stage
  // plan of the pass can move its boundary.
  std::vector<PlanStats> moves;
  std::vector<Plan> move_plans;  // the plan each move went into
};

// Each plan of the pass (the header's first paragraph) that both runs can train (`run.fits`,
// `sim.fits`), measured; with reference_s > 0, the drift reference is measured before the first and
// after every plan and each plan's times are divided by the mean of the two around it over
// reference_s (the calibration's median of that plan). Then the boundary walk (`moves`), with
// the drift reference after it only (its moves must follow one another).
PipelinePass measure_pipelines(const Stepper& step, const TrainingRun& run, const SimRun& sim,
                               const Plan& reference, double reference_s, int layers,
                               const LiveMeasureOptions& o);

// The pass's stages (ComputePoints of their blocks, with each one's m) against the device fit
// (out of sample) and against a fit that took them in too (not used), one progress line: per
// m, the median of predicted / measured − 1 (docs/calibration.md, "The schedule's fill and
// drain").
void report_staged_fit(const DeviceFit& without, const DeviceFit& with,
                       const std::vector<ComputePoint>& staged, const std::vector<int>& staged_m,
                       const LiveMeasureOptions& o);

}  // namespace shardgym::detail

namespace shardgym {

// The file's pipelined plans against the simulator of `config` calibrated with `c` (noise-
// free): one line per plan (live and simulated step, error, both bubbles, the formula) and the
// median error by micro-batch count. "" when the file has no pipelined plan. Throws
// std::invalid_argument if the file does not fit the config's cluster.
std::string pipelines_against_simulator(const CalibrationFile& c, const std::string& config,
                                        uint64_t seed);

}  // namespace shardgym
