// Re-executing a recorded episode (CompilerGym's `validate`): the trace's config, seed and
// initial plan build the env again, on the recorded backend or another one, the recorded
// actions are played in order, and every step's figures are compared with the recorded ones.
//
//   ReexecuteOptions o;  o.backend = "sim";
//   DriftReport r = reexecute_episode("runs/x/trace.h5", 0, o);
//   std::cout << format_drift(r);           // exit non-zero when !r.within_tolerance
//
// Same backend, same seed, on the simulator: the drift is exactly 0 (the cost model and its
// noise are deterministic). On the live backend the drift is the run-to-run spread. Across
// backends (a live trace re-executed on the simulator) it is the simulator's error on those
// very plans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardgym {

struct ReexecuteOptions {
  std::string backend;     // "sim" | "live" | "" = the recorded one
  std::string config;      // "" = the trace's own config text (includes from config_path)
  double tolerance = -1;   // < 0: 1e-9 on the simulator, 0.25 on live runs
};

// Relative drift |replayed − recorded| / max(|recorded|, tiny) of one figure, per step.
struct DriftComponent {
  std::string name;               // reward, step_latency_s, repartition_s, ...
  std::vector<double> per_step;   // relative drift at each step (inf: one side failed)
  double max = 0, median = 0;
  int worst_step = -1;
};

struct DriftReport {
  std::string trace, env_id, backend;
  int episode = 0, steps = 0;
  uint64_t seed = 0;
  std::string initial_plan;
  double tolerance = 0;
  std::vector<DriftComponent> components;
  bool within_tolerance = true;
};

// Throws std::runtime_error (trace errors, an episode that is absent or incomplete, a
// config that no longer loads, actions that do not fit the env) and ConfigError.
DriftReport reexecute_episode(const std::string& trace, int episode,
                              const ReexecuteOptions& options);

std::string format_drift(const DriftReport& report, bool per_step = false);
std::string drift_json(const DriftReport& report);

// `shardgym inspect`: the widths a trace records (observations, actions, blocks, ranks)
// against those of the env its own config builds (parse_recorded_experiment: from the trace
// alone, which reads nothing outside itself). Sim and live env ids only. Throws
// std::runtime_error naming the first mismatch; returns "" when checked, else why not.
struct TraceSummary;
std::string check_trace_widths(const TraceSummary& summary);

}  // namespace shardgym
