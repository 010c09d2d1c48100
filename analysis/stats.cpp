#include "analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>

namespace shardgym {
namespace {

void require_samples(const std::vector<double>& xs, const char* what) {
  if (xs.empty()) throw std::invalid_argument(std::string(what) + ": no samples");
}

// Uniform index in [0, n) from raw engine output, rejection-sampled so that it is unbiased
// and identical on every standard library.
size_t draw_index(std::mt19937_64& rng, size_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return static_cast<size_t>(x % n);
}

// Linear-interpolation quantile (numpy's default) of sorted data.
double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

const char* statistic_name(Statistic s) {
  switch (s) {
    case Statistic::kMean:
      return "mean";
    case Statistic::kIqm:
      return "IQM";
    case Statistic::kMedian:
      return "median";
  }
  return "?";
}

double mean(const std::vector<double>& xs) {
  require_samples(xs, "mean");
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

double median(const std::vector<double>& xs) {
  require_samples(xs, "median");
  std::vector<double> s = xs;
  std::sort(s.begin(), s.end());
  return quantile_sorted(s, 0.5);
}

double iqm(const std::vector<double>& xs) {
  require_samples(xs, "iqm");
  std::vector<double> s = xs;
  std::sort(s.begin(), s.end());
  // scipy.stats.trim_mean(x, 0.25), which rliable's IQM is: floor(n / 4) whole samples cut
  // from each end, the rest averaged.
  const size_t cut = s.size() / 4;
  double sum = 0;
  for (size_t i = cut; i < s.size() - cut; ++i) sum += s[i];
  return sum / static_cast<double>(s.size() - 2 * cut);
}

double sample_stddev(const std::vector<double>& xs) {
  require_samples(xs, "stddev");
  if (xs.size() < 2) return 0;
  const double m = mean(xs);
  double ss = 0;
  for (double x : xs) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(xs.size() - 1));
}

double compute_statistic(Statistic s, const std::vector<double>& xs) {
  switch (s) {
    case Statistic::kMean:
      return mean(xs);
    case Statistic::kIqm:
      return iqm(xs);
    case Statistic::kMedian:
      return median(xs);
  }
  throw std::invalid_argument("unknown statistic");
}

Interval bootstrap_ci(const std::vector<double>& xs, Statistic s, const BootstrapOptions& options) {
  require_samples(xs, "bootstrap_ci");
  if (!(options.confidence > 0 && options.confidence < 1)) {
    throw std::invalid_argument("bootstrap_ci: confidence must be in (0, 1), got " +
                                std::to_string(options.confidence));
  }
  if (options.resamples < 1) throw std::invalid_argument("bootstrap_ci: resamples must be >= 1");
  Interval ci;
  ci.n = static_cast<int>(xs.size());
  ci.point = compute_statistic(s, xs);
  if (xs.size() == 1) {
    ci.low = ci.high = ci.point;
    return ci;
  }
  std::mt19937_64 rng(options.seed);
  std::vector<double> stats(options.resamples), resample(xs.size());
  for (int r = 0; r < options.resamples; ++r) {
    for (double& x : resample) x = xs[draw_index(rng, xs.size())];
    stats[r] = compute_statistic(s, resample);
  }
  std::sort(stats.begin(), stats.end());
  const double alpha = 1 - options.confidence;
  ci.low = quantile_sorted(stats, alpha / 2);
  ci.high = quantile_sorted(stats, 1 - alpha / 2);
  return ci;
}

std::string format_interval(const Interval& ci, int digits) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.*f [%.*f, %.*f]", digits, ci.point, digits, ci.low, digits,
                ci.high);
  return buf;
}

double quantile(std::vector<double> xs, double q) {
  if (xs.empty()) throw std::invalid_argument("quantile of an empty sample");
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("quantile q outside [0, 1]");
  std::sort(xs.begin(), xs.end());
  const double pos = q * (xs.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (pos - lo) * (xs[hi] - xs[lo]);
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("kendall_tau: samples of unequal length");
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;
      if (da == 0) {
        ++ties_a;
      } else if (db == 0) {
        ++ties_b;
      } else if ((da > 0) == (db > 0)) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  }
  const double n0 = concordant + discordant;
  const double denom = std::sqrt((n0 + ties_a) * (n0 + ties_b));
  return denom > 0 ? (concordant - discordant) / denom : std::nan("");
}

}  // namespace shardgym
