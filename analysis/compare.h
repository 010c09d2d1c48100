// Agent comparison: one row per agent, one column per metric, every metric a ratio to the
// static Megatron-LM plan run under the same seed and scenario, summarised over runs with a
// bootstrap 95% interval. This is the table `shardgym compare` prints and that goes into the
// README's "Results" section.
//
//   std::vector<AgentRuns> runs = {{"ppo", {1.10, 1.14, 1.09}, {0.97, 0.96, 0.98}, {}}};
//   std::cout << format_comparison(runs, TableFormat::kMarkdown);
//
// Ratio conventions (so that each column reads the same way everywhere):
//   throughput  agent tokens/s ÷ Megatron tokens/s        > 1 is faster
//   peak memory agent peak bytes ÷ Megatron peak bytes    < 1 uses less
//   energy      agent J/token ÷ Megatron J/token          < 1 uses less
// A metric with no samples (e.g. energy of a backend that cannot measure it) shows "n/a".
#pragma once

#include <string>
#include <vector>

#include "analysis/stats.h"
#include "analysis/table.h"

namespace shardgym {

struct AgentRuns {
  std::string agent;
  std::vector<double> throughput_ratio;  // one value per run (seed)
  std::vector<double> memory_ratio;
  std::vector<double> energy_ratio;
};

struct ComparisonOptions {
  Statistic statistic = Statistic::kIqm;
  BootstrapOptions bootstrap;
  int digits = 2;
  std::string baseline = "Megatron";
};

struct ComparisonRow {
  std::string agent;
  int runs = 0;  // the largest sample count of the row's metrics
  // Empty optional-like: n == 0 when the metric had no samples.
  Interval throughput, memory, energy;
};

// Per-run ratios of paired samples: agent[i] / baseline[i]. Throws std::invalid_argument when
// the sizes differ or a baseline value is not positive.
std::vector<double> paired_ratios(const std::vector<double>& agent,
                                  const std::vector<double>& baseline);

std::vector<ComparisonRow> summarize_runs(const std::vector<AgentRuns>& runs,
                                          const ComparisonOptions& options = {});
Table comparison_table(const std::vector<ComparisonRow>& rows,
                       const ComparisonOptions& options = {});
// One sentence saying what the figures are (statistic, interval, resamples, seed, ratios).
std::string comparison_caption(const ComparisonOptions& options = {});
// Table + caption in the requested format.
std::string format_comparison(const std::vector<AgentRuns>& runs, TableFormat format,
                              const ComparisonOptions& options = {});

}  // namespace shardgym
