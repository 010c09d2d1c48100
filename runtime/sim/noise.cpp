#include "runtime/sim/noise.h"

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace shardgym {

double inverse_normal_cdf(double p) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("inverse_normal_cdf: p must be in (0, 1)");
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  const double lo = 0.02425;
  double x;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - lo) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step against the exact CDF.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

namespace {

std::vector<double> level_table(double sigma) {
  std::vector<double> table(LogNormalNoise::kLevels);
  double sum = 0;
  for (int i = 0; i < LogNormalNoise::kLevels; ++i) {
    const double z = inverse_normal_cdf((i + 0.5) / LogNormalNoise::kLevels);
    table[i] = std::exp(sigma * z - sigma * sigma / 2);
    sum += table[i];
  }
  const double mean = sum / LogNormalNoise::kLevels;
  for (double& f : table) f /= mean;
  return table;
}

// The live tables by σ's bits (the same bits build the same table).
std::shared_ptr<const std::vector<double>> shared_level_table(double sigma) {
  uint64_t key;
  std::memcpy(&key, &sigma, sizeof key);
  static std::mutex mutex;
  static std::map<uint64_t, std::weak_ptr<const std::vector<double>>> live;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<const std::vector<double>>& slot = live[key];
  if (std::shared_ptr<const std::vector<double>> held = slot.lock()) return held;
  auto made = std::make_shared<const std::vector<double>>(level_table(sigma));
  slot = made;
  return made;
}

}  // namespace

LogNormalNoise::LogNormalNoise(double sigma) : sigma_(sigma) {
  if (!(sigma >= 0) || sigma > 2)
    throw std::invalid_argument("noise sigma " + std::to_string(sigma) +
                                " is outside [0, 2]");
  if (sigma_ <= 0) return;
  table_ = shared_level_table(sigma_);
  levels_ = table_->data();
}

}  // namespace shardgym
