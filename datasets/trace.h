// Trace schema `shardgym-trace` v1 as plain data (docs/design.md §6; the file layout is spelled out
// in docs/trace-format.md so that anyone with h5py can read a trace without this code).
//
// TraceWriter (trace_writer.h) turns env transitions into a trace file, TraceReader
// (trace_reader.h) turns a file back into these structs, ReplayRun (replay_run.h) plays an
// episode back as a TrainingRun. No HDF5 type appears here: HDF5 is private to this library.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/experiment_spec.h"
#include "runtime/core/measurement.h"
#include "runtime/core/plan.h"

namespace shardgym {

inline constexpr const char* kTraceFormat = "shardgym-trace";
inline constexpr int kTraceVersion = 1;

// What the caller knows about the run when it opens a trace (root attributes).
struct TraceMetadata {
  std::string env_id;
  std::string config;   // the experiment's full YAML text
  std::string config_path;  // where that text was read from (absolute; "" = unknown): its
                            // `include:` paths resolve from there when the trace is re-executed
  std::string git_sha;  // of the code that produced the trace; the caller supplies it
  std::string host;     // "" = describe_host()
  std::string agent;    // agent of the episodes (TraceWriter::set_agent changes it)
  int world = 0;        // P; 0 = taken from the first reset measurement's peak memory
  // Initial /strategies table. Seeding it with the catalog's entries makes plan ids equal to
  // catalog indices; strategies met later are appended.
  std::vector<std::string> strategies;
};

// Metadata of an experiment: env id, YAML text, world, agent and the catalog's strategies.
TraceMetadata make_trace_metadata(const ExperimentSpec& spec, const std::string& git_sha);
// "Linux <node> <release> <machine>, <N> CPUs".
std::string describe_host();
// Current UTC time as ISO 8601, "2024-05-01T12:34:56Z".
std::string iso_time_now();

// Root attributes of a trace file.
struct TraceAttributes {
  std::string format;
  int version = 0;
  std::string env_id, config, git_sha, created, host;
  std::string config_path;  // optional attribute: "" in traces written before it existed
};

// What the episode group's attributes say (readable without touching its datasets).
struct TraceEpisodeInfo {
  std::string name;       // "episode_K"
  int index = 0;          // K
  bool complete = false;  // false: the writer never reached end_episode (killed run)
  uint64_t seed = 0;
  std::string agent, backend;
  std::string initial_plan;  // plan text installed at reset
  int steps = -1;            // N; -1 when incomplete
  std::string error;         // first failing step's error ("" = none)
  int error_step = -1;
};

// One complete episode. Row-major arrays; N steps, D observation features, A action entries
// (B for the standard MultiDiscrete action), B blocks, P ranks.
struct TraceEpisode {
  TraceEpisodeInfo info;
  int obs_dim = 0, action_dim = 0, num_blocks = 0, world = 0;

  std::vector<float> observations;                 // (N+1)·D: reset observation, then one per step
  std::vector<int32_t> actions;                    // N·A
  std::vector<double> rewards;                     // N
  std::vector<uint8_t> terminations, truncations;  // N

  // metrics/: the Measurement of each step
  std::vector<double> step_latency_s, repartition_s, repartition_bytes, energy_j, tokens, loss;
  std::vector<double> repartition_peak_bytes;  // N (NaN: traces written before it existed)
  std::vector<uint8_t> ok, oom;                                // N
  std::vector<double> peak_memory_bytes;                       // N·P
  std::vector<double> block_fwd_s, block_bwd_s, block_comm_s;  // N·B (NaN: not measured)
  std::string latency_source, memory_source, energy_source;    // distinct values, ','-joined

  std::vector<int32_t> plans;  // N·B ids into the /strategies table (-1: no plan recorded)
  std::map<std::string, std::vector<double>> scalars;  // Info::scalars per step, NaN if absent
  Measurement initial;                                 // the measurement reported by reset

  int steps() const { return static_cast<int>(rewards.size()); }
  double episode_return() const;
  // Step t as a Measurement (error text only for the failing step the episode records).
  Measurement measurement(int t) const;
  // Plan in force after step t; throws std::runtime_error for ids outside `strategies`.
  Plan plan(int t, const std::vector<std::string>& strategies) const;
};

}  // namespace shardgym
