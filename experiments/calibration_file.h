// Calibration files: what `shardgym calibrate` measured on the live runtime and the simulator
// parameters fitted from it (format: docs/calibration.md). A config's `cluster.calibration:
// FILE` (relative to the config) makes the simulator use them: the fitted device and link
// figures replace the named catalog entries, and the measured block table is consulted for the
// model it was measured on (RuntimeCalibration, runtime/core/cluster_spec.h).
#pragma once

#include <string>

#include "runtime/core/cluster_spec.h"

namespace shardgym {

struct CalibrationFile {
  static constexpr int kVersion = 1;
  // Where and how it was measured.
  std::string created;   // UTC, ISO 8601
  std::string command;   // the command line that wrote it
  std::string config;    // the experiment config it calibrated
  std::string host, cpu, os;
  int cores = 0;
  double memory_gib = 0;
  std::string backend, launch, device;  // live runtime: gloo/nccl, threads/processes, cpu/cuda
  int ranks = 0, threads_per_rank = 0;
  int warmup = 0, iterations = 0;       // per measured plan
  int passes = 1;                       // over the uniform plans (1 in files without it)
  int plans = 0;                        // calibration plans run
  // The plan measured beside every plan to divide out the machine's drift ("" = none), the
  // 10th-to-90th percentile range of the speed factors it measured, and its median step
  // latency (0 in files without it): validate-sim measures it again to say how fast the
  // machine runs against the calibration.
  std::string drift_reference;
  double drift_spread = 0;
  double drift_reference_s = 0;
  // Fitted parameters of the physical model (used where the table has no entry).
  std::string device_name;
  double peak_flops = 0, memory_bw = 0;      // effective, replacing the catalog's
  // Seconds per kernel the rank's own thread spends issuing it, added to the compute of blocks
  // the table does not hold (CPU ranks issue and run each op on one thread: no overlap); 0 in
  // files without it. The device's host_kernel_s, with the issue time additive (serial_host).
  double kernel_s = 0;
  // Seconds per collective on the rank's thread besides the exchange itself (argument checks,
  // contiguous copies, the call into the backend), fitted apart from kernel_s; < 0 in files
  // without it, where a collective costs kernel_s. The device's host_collective_s.
  double collective_s = -1;
  std::string link_name;
  double link_latency_s = 0, link_bandwidth = 0;  // α per ring step, B per rank
  // Fit quality: median |relative error| of the fitted model on the calibration samples.
  double compute_fit_error = 0, comm_fit_error = 0, overhead_fit_error = 0;
  double memory_fit_error = 0, repartition_fit_error = 0;
  RuntimeCalibration runtime;  // block table, per-step overhead, optimizer, noise

  // Microbenchmarks: every collective on every group the strategies form and every pipeline's
  // first stage boundary, at a few sizes, run alone (no training step around them), and an
  // α–β fit of each. The collectives' fit is recorded beside the link fit from the training
  // step's waits, not used by the simulator; the stage boundaries' (p2p) prices a pipeline's
  // stage-to-stage transfers, whose waits the schedule's replay counts itself
  // (docs/calibration.md says why). Files before the boundaries were timed: the
  // collectives' fit per ring step stands in for it (the same exchange with a neighbour);
  // absent in files written before either was measured.
  struct Collective {
    std::string op;      // all_reduce | all_gather | reduce_scatter | p2p
    std::string group;   // member ranks, "0,1"
    double bytes = 0;    // per rank, input
    double seconds = 0;  // slowest member, median
  };
  std::vector<Collective> collectives;
  double collective_latency_s = 0, collective_bandwidth = 0, collective_fit_error = 0;
  double p2p_latency_s = 0, p2p_bandwidth = 0, p2p_fit_error = 0;  // bandwidth 0: not timed

  // The schedule's fill and drain (calibrate's pipeline pass, calibrate_pipelines.h): the
  // uniform plan of the drift reference's strategy over every stage count the world and the
  // layers allow, at m = 1, 2, 4, 1F1B and GPipe, measured as the table's plans are. Recorded,
  // not used by the simulator (docs/calibration.md, "The schedule's fill and drain"); empty in
  // files written before it or without the pass.
  struct PipelineTiming {
    std::string plan;            // "uniform:dp@pp(p=2,m=4)"
    double step_s = 0;           // median step latency, divided by the machine's speed factor
    double optimizer_s = 0;      // median, the critical rank's
    double stage_compute_s = 0;  // the slowest stage's blocks, forward + backward, per micro-batch
    double bubble = 0;           // 1 − m · stage_compute / (step − optimizer)
  };
  std::vector<PipelineTiming> pipelines;
};

std::string calibration_to_yaml(const CalibrationFile& c);
// Throws ConfigError (file, key, line, reason) on anything it does not accept.
CalibrationFile parse_calibration_file(const std::string& text, const std::string& file);
// Reads (size-limited, regular files only) and parses.
CalibrationFile load_calibration_file(const std::string& path);
// Replaces the named device's and link's figures in `cluster` and installs the table.
// Returns "" or why the file does not fit this cluster (a name it lacks, another world size).
std::string apply_calibration(const CalibrationFile& c, const std::string& path,
                              ClusterSpec& cluster);

}  // namespace shardgym
