#include "analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardgym {
namespace {

Interval summarize_metric(const std::vector<double>& xs, const ComparisonOptions& options) {
  if (xs.empty()) return Interval{};
  return bootstrap_ci(xs, options.statistic, options.bootstrap);
}

std::string cell(const Interval& ci, int digits) {
  return ci.n == 0 ? std::string("n/a") : format_interval(ci, digits);
}

}  // namespace

std::vector<double> paired_ratios(const std::vector<double>& agent,
                                  const std::vector<double>& baseline) {
  if (agent.size() != baseline.size()) {
    throw std::invalid_argument("paired_ratios: " + std::to_string(agent.size()) +
                                " agent runs but " + std::to_string(baseline.size()) +
                                " baseline runs");
  }
  std::vector<double> out(agent.size());
  for (size_t i = 0; i < agent.size(); ++i) {
    if (!(baseline[i] > 0)) {
      throw std::invalid_argument("paired_ratios: baseline value of run " + std::to_string(i) +
                                  " is not positive (" + std::to_string(baseline[i]) + ")");
    }
    out[i] = agent[i] / baseline[i];
  }
  return out;
}

std::vector<ComparisonRow> summarize_runs(const std::vector<AgentRuns>& runs,
                                          const ComparisonOptions& options) {
  std::vector<ComparisonRow> rows;
  for (const AgentRuns& r : runs) {
    ComparisonRow row;
    row.agent = r.agent;
    row.throughput = summarize_metric(r.throughput_ratio, options);
    row.memory = summarize_metric(r.memory_ratio, options);
    row.energy = summarize_metric(r.energy_ratio, options);
    row.runs = std::max({row.throughput.n, row.memory.n, row.energy.n});
    rows.push_back(row);
  }
  return rows;
}

Table comparison_table(const std::vector<ComparisonRow>& rows, const ComparisonOptions& options) {
  const std::string x = " ×" + options.baseline;
  Table table({"agent", "runs", "throughput" + x, "peak memory" + x, "energy" + x});
  for (int c = 1; c < table.columns(); ++c) table.set_align(c, Align::kRight);
  for (const ComparisonRow& r : rows) {
    table.add_row({r.agent, std::to_string(r.runs), cell(r.throughput, options.digits),
                   cell(r.memory, options.digits), cell(r.energy, options.digits)});
  }
  return table;
}

std::string comparison_caption(const ComparisonOptions& options) {
  const long pct = std::lround(options.bootstrap.confidence * 100);
  return std::string(statistic_name(options.statistic)) + " over runs [" + std::to_string(pct) +
         "% percentile-bootstrap interval, " + std::to_string(options.bootstrap.resamples) +
         " resamples, seed " + std::to_string(options.bootstrap.seed) + "]; ratios to the static " +
         options.baseline + " plan under the same seed: throughput > 1 is faster, peak memory " +
         "and energy < 1 use less.";
}

std::string format_comparison(const std::vector<AgentRuns>& runs, TableFormat format,
                              const ComparisonOptions& options) {
  std::string out = comparison_table(summarize_runs(runs, options), options).render(format);
  return out + "\n" + comparison_caption(options) + "\n";
}

}  // namespace shardgym
