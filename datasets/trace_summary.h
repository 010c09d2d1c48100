// What `shardgym inspect TRACE` prints: a trace's attributes and one line per episode, as a
// struct (for --json), as human text, or as JSON. Reads every complete episode once.
//
//   std::cout << describe_trace("run.h5");
//   std::cout << to_json(summarize_trace("run.h5"));
//
// Errors are the TraceReader's: std::runtime_error starting with "trace '<path>': ".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/trace.h"

namespace shardgym {

struct TraceEpisodeSummary {
  TraceEpisodeInfo info;      // name, complete, seed, agent, backend, steps, error
  double episode_return = 0;  // Σ rewards
  double mean_step_latency_s = 0;
  double total_repartition_s = 0;
  double total_energy_j = 0;
  double total_tokens = 0;
  double max_peak_memory_bytes = 0;            // over steps and ranks (NaN entries skipped)
  bool terminated = false, truncated = false;  // flags of the last step
};

struct TraceSummary {
  std::string path;
  TraceAttributes attributes;  // config included
  int schema_version = 0;
  int num_strategies = 0;
  // Shapes of the first complete episode (0 when there is none).
  int num_blocks = 0, world = 0, obs_dim = 0, action_dim = 0;
  std::vector<TraceEpisodeSummary> episodes;  // complete and incomplete, by index

  int complete_episodes() const;
  int64_t total_steps() const;  // over complete episodes
  double mean_return() const;   // over complete episodes (0 when none)
};

TraceSummary summarize_trace(const std::string& path);
std::string describe_trace(const TraceSummary& summary);
std::string describe_trace(const std::string& path);
// One JSON object (config text included, escaped); NaN and infinities become null.
std::string to_json(const TraceSummary& summary);
// `text` as a JSON string literal, quotes included.
std::string json_string(const std::string& text);

}  // namespace shardgym
