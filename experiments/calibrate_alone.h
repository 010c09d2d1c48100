// What `calibrate` times with no training step around it: every collective on every group the
// strategies form and every pipeline's first stage boundary, and their α–β fits
// (docs/calibration.md, "Stage boundaries alone"). Internal to calibrate.cpp.
#pragma once

#include "experiments/calibration_file.h"
#include "runtime/core/training_run.h"

namespace shardgym::detail {

// Into c.collectives, c.collective_* and c.p2p_*. `native_rs`: the backend has a
// reduce-scatter of its own (NCCL); Gloo's is an all-reduce and a slice.
void time_collectives_alone(TrainingRun& run, bool native_rs, CalibrationFile& c);

}  // namespace shardgym::detail
