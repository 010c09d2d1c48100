#include "experiments/compare_traces.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "datasets/trace_reader.h"

namespace shardgym {

EpisodeSummary summarize_recorded(const TraceEpisode& ep) {
  EpisodeSummary s;
  s.agent = ep.info.agent;
  s.seed = ep.info.seed;
  s.steps = ep.steps();
  const size_t P = static_cast<size_t>(ep.world);
  for (int t = 0; t < ep.steps(); ++t) {
    s.total_reward += ep.rewards[t];
    const bool failed = !ep.ok[t] || ep.oom[t] || (t == ep.info.error_step);
    if (failed) {
      ++s.failed_steps;
      continue;
    }
    s.tokens += ep.tokens[t];
    s.time_s += ep.step_latency_s[t] + ep.repartition_s[t];
    s.repartition_s += ep.repartition_s[t];
    s.energy_j += ep.energy_j[t];
    for (size_t r = 0; r < P; ++r) {
      const double p = ep.peak_memory_bytes[t * P + r];
      if (p == p) s.peak_memory_bytes = std::max(s.peak_memory_bytes, p);
    }
  }
  s.throughput = s.time_s > 0 ? s.tokens / s.time_s : 0;
  s.energy_per_token_j = s.tokens > 0 ? s.energy_j / s.tokens : 0;
  return s;
}

namespace {

// The figures a summary is made of must be possible: on every step that did not fail, a
// finite latency > 0, finite tokens > 0, finite repartition time >= 0, energy >= 0 or NaN (not
// measured) and a finite reward (a zero or
// NaN latency used to become a throughput ratio). Throws naming the trace, episode and step.
void check_figures(const TraceEpisode& ep, const std::string& file) {
  auto bad = [&](int t, const std::string& what, double v) {
    throw std::runtime_error("--from-traces: trace '" + file + "', " + ep.info.name + " step " +
                             std::to_string(t) + ": " + what + " = " + std::to_string(v) +
                             " is impossible for a step that did not fail");
  };
  for (int t = 0; t < ep.steps(); ++t) {
    if (!ep.ok[t] || ep.oom[t] || t == ep.info.error_step) continue;
    if (!(std::isfinite(ep.step_latency_s[t]) && ep.step_latency_s[t] > 0))
      bad(t, "step_latency_s", ep.step_latency_s[t]);
    if (!(std::isfinite(ep.tokens[t]) && ep.tokens[t] > 0)) bad(t, "tokens", ep.tokens[t]);
    if (!(std::isfinite(ep.repartition_s[t]) && ep.repartition_s[t] >= 0))
      bad(t, "repartition_s", ep.repartition_s[t]);
    if (ep.energy_j[t] < 0 || std::isinf(ep.energy_j[t])) bad(t, "energy_j", ep.energy_j[t]);
    if (!std::isfinite(ep.rewards[t])) bad(t, "reward", ep.rewards[t]);
  }
}

}  // namespace

CompareResult compare_from_traces(const std::string& dir, const std::string& baseline) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("--from-traces: no directory '" + dir + "'");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".h5") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("--from-traces: no .h5 trace in '" + dir + "'");

  std::vector<std::string> order;                                 // agents, first seen first
  std::map<std::string, std::map<uint64_t, EpisodeSummary>> runs;  // agent → seed → summary
  for (const fs::path& f : files) {
    const TraceReader reader(f.string());
    for (const TraceEpisodeInfo& info : reader.episodes()) {
      if (!info.complete) continue;
      const TraceEpisode ep = reader.read_episode(info.index);
      check_figures(ep, f.string());
      EpisodeSummary s = summarize_recorded(ep);
      if (s.agent.empty()) s.agent = f.stem().string();
      if (!runs.count(s.agent)) order.push_back(s.agent);
      runs[s.agent][s.seed] = s;  // a later episode of the same seed replaces an earlier one
    }
  }
  const auto base = runs.find(baseline);
  if (base == runs.end()) {
    throw std::runtime_error("--from-traces: no episode of the baseline '" + baseline + "' in '" +
                             dir + "' (compare --out records it as " + baseline + ".h5)");
  }
  CompareResult result;
  result.baseline = baseline;
  for (const auto& [seed, s] : base->second) {
    result.seeds.push_back(seed);
    result.baseline_episodes.push_back(s);
  }
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  for (const std::string& agent : order) {
    AgentComparison c;
    c.agent = agent;
    const auto& mine = runs[agent];
    for (size_t i = 0; i < result.seeds.size(); ++i) {
      const auto it = mine.find(result.seeds[i]);
      if (it == mine.end()) {
        throw std::runtime_error("--from-traces: agent '" + agent + "' has no episode of seed " +
                                 std::to_string(result.seeds[i]) + ", which the baseline has");
      }
      const EpisodeSummary& b = result.baseline_episodes[i];
      c.throughput_ratio.push_back(ratio(it->second.throughput, b.throughput));
      c.memory_ratio.push_back(ratio(it->second.peak_memory_bytes, b.peak_memory_bytes));
      c.energy_ratio.push_back(ratio(it->second.energy_per_token_j, b.energy_per_token_j));
      c.episodes.push_back(it->second);
    }
    result.agents.push_back(std::move(c));
  }
  return result;
}

}  // namespace shardgym
