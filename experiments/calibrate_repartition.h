// The repartition terms of `calibrate`: fitted on the measured changes between plans, each
// counted (blocks whose state moves, messages) by the simulator that prices it
// (docs/calibration.md, "The repartition's terms"). Internal to calibrate.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "experiments/calibration_file.h"
#include "experiments/config.h"
#include "experiments/live_measure.h"
#include "runtime/core/plan.h"

namespace shardgym::detail {

// One measured change: the run held `from`, stepped into `to`; `stats` its measurement
// (repartition_s, repartition_bytes). boundary_move: one of the pipeline pass's.
struct MeasuredChange {
  Plan from, to;
  const PlanStats* stats = nullptr;
  bool boundary_move = false;
};

// Into c.runtime.repartition_* and c.repartition_fit_error (fit_repartition over the changes
// that change anything, as the simulator of `sspec` counts them); progress lines: the
// changes left out, and with boundary moves the error on them and on the others beside a fit
// without them (not used). Nothing written with fewer changes than terms.
void fit_repartition_terms(const ExperimentSpec& sspec, const std::vector<MeasuredChange>& changes,
                           uint64_t seed, const LiveMeasureOptions& o, CalibrationFile& c);

}  // namespace shardgym::detail
