// `shardgym compare --from-traces DIR`: the comparison table rebuilt from the traces that
// `compare --out DIR` recorded (one file per agent, one episode per seed), with the figures
// computed exactly as the live comparison computes them (agents/evaluate.h run_episode):
// throughput = Σ tokens / Σ (latency + repartition) over the steps that did not fail, peak
// memory the fullest rank, energy per token.
#pragma once

#include <string>

#include "agents/evaluate.h"
#include "datasets/trace.h"

namespace shardgym {

// One recorded episode as run_episode would have summarised it.
EpisodeSummary summarize_recorded(const TraceEpisode& episode);

// Every complete episode of every *.h5 under `dir`, grouped by the agent recorded in it and
// paired with `baseline`'s episode of the same seed. Agents in file-name order; the baseline
// also appears as a row of its own. Throws std::runtime_error when `dir` holds no trace, no
// baseline trace, or an agent lacks a seed the baseline has (the pairing would be unfair).
CompareResult compare_from_traces(const std::string& dir, const std::string& baseline);

}  // namespace shardgym
