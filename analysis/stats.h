// Summary statistics for comparing agents over a handful of seeds (Agarwal et al. 2021,
// "Deep RL at the Edge of the Statistical Precipice"): with 3–10 runs a point estimate alone
// misleads, so every figure comes with a seeded percentile-bootstrap 95% interval, and the
// interquartile mean (IQM) is offered as a robust alternative to the mean.
//
//   BootstrapOptions opt;
//   opt.seed = 7;
//   Interval ci = bootstrap_ci(ratios, Statistic::kIqm, opt);
//   // ci.point, ci.low, ci.high
//
// Same samples + same seed give the same interval on every platform (the resampling draws
// use raw 64-bit engine output, not std distributions, whose algorithms are unspecified).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardgym {

enum class Statistic { kMean, kIqm, kMedian };
const char* statistic_name(Statistic s);

double mean(const std::vector<double>& xs);  // throws std::invalid_argument when empty
double median(const std::vector<double>& xs);
// Interquartile mean as rliable computes it (scipy.stats.trim_mean(x, 0.25)): the sorted
// samples less floor(n/4) at each end, averaged; so shardgym compare and shardgym report agree.
double iqm(const std::vector<double>& xs);
// Linear-interpolation quantile (numpy's default), q in [0, 1]; throws when empty.
double quantile(std::vector<double> xs, double q);
// Kendall's τ-b between two equally long samples (ties counted as neither concordant nor
// discordant, normalised as in scipy.stats.kendalltau); NaN when either side is constant.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);
double sample_stddev(const std::vector<double>& xs);  // n−1 denominator; 0 for n = 1
double compute_statistic(Statistic s, const std::vector<double>& xs);

struct Interval {
  double point = 0;  // the statistic on the original samples
  double low = 0;
  double high = 0;
  int n = 0;  // samples
};

struct BootstrapOptions {
  double confidence = 0.95;
  int resamples = 2000;
  uint64_t seed = 0;
};

// Percentile bootstrap. With one sample the interval collapses to the point. Throws
// std::invalid_argument for an empty sample or a confidence outside (0, 1).
Interval bootstrap_ci(const std::vector<double>& xs, Statistic s = Statistic::kMean,
                      const BootstrapOptions& options = {});

// "1.12 [1.08, 1.15]" with `digits` decimals.
std::string format_interval(const Interval& ci, int digits = 2);

}  // namespace shardgym
