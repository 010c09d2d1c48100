#include "experiments/calibration_fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analysis/stats.h"

namespace shardgym {

std::vector<double> nonneg_lstsq(const std::vector<std::vector<double>>& x,
                                 const std::vector<double>& y) {
  const size_t n = x.size();
  if (n == 0 || n > 6) throw std::logic_error("nonneg_lstsq: 1 to 6 columns");
  std::vector<double> best(n, 0.0);
  double best_r = 0;
  for (double v : y) best_r += v * v;  // all coefficients 0
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<size_t> cols;
    for (size_t j = 0; j < n; ++j)
      if (mask & (1u << j)) cols.push_back(j);
    const size_t k = cols.size();
    // Normal equations A c = b, solved by Gaussian elimination with partial pivoting.
    std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0.0));
    for (size_t r = 0; r < k; ++r) {
      for (size_t q = 0; q < k; ++q)
        for (size_t i = 0; i < y.size(); ++i) a[r][q] += x[cols[r]][i] * x[cols[q]][i];
      for (size_t i = 0; i < y.size(); ++i) a[r][k] += x[cols[r]][i] * y[i];
    }
    bool singular = false;
    for (size_t c = 0; c < k && !singular; ++c) {
      size_t piv = c;
      for (size_t r = c + 1; r < k; ++r)
        if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
      std::swap(a[c], a[piv]);
      if (std::abs(a[c][c]) < 1e-300) {
        singular = true;
        break;
      }
      for (size_t r = 0; r < k; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (size_t q = c; q <= k; ++q) a[r][q] -= f * a[c][q];
      }
    }
    if (singular) continue;
    std::vector<double> coef(n, 0.0);
    bool ok = true;
    for (size_t r = 0; r < k; ++r) {
      coef[cols[r]] = a[r][k] / a[r][r];
      ok = ok && coef[cols[r]] >= 0 && std::isfinite(coef[cols[r]]);
    }
    if (!ok) continue;
    double res = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      double p = 0;
      for (size_t j = 0; j < n; ++j) p += coef[j] * x[j][i];
      res += (y[i] - p) * (y[i] - p);
    }
    if (res < best_r) best_r = res, best = coef;
  }
  return best;
}

void nonneg_fit2(const std::vector<double>& x1, const std::vector<double>& x2,
                 const std::vector<double>& y, double& a, double& b) {
  const std::vector<double> c = nonneg_lstsq({x1, x2}, y);
  a = c[0], b = c[1];
}

DeviceFit fit_device(const std::vector<ComputePoint>& points, bool kernels) {
  std::vector<double> physics, count, colls, measured, ratio;
  for (const ComputePoint& p : points) {
    if (!(p.physics > 0 && p.measured > 0)) continue;
    physics.push_back(p.physics), count.push_back(p.kernels), colls.push_back(p.collectives);
    measured.push_back(p.measured);
    ratio.push_back(p.measured / p.physics);
  }
  if (ratio.empty()) throw std::runtime_error("calibration: no block with compute time measured");
  DeviceFit fit;
  double a = median(ratio), b = 0, c = 0;  // measured ≈ a · physics, a = 1 / speed
  if (kernels) {
    // Relative residuals: every row weighs alike, small shapes as much as large ones.
    std::vector<double> x1, x2, x3, ones;
    for (size_t i = 0; i < measured.size(); ++i) {
      x1.push_back(physics[i] / measured[i]);
      x2.push_back(count[i] / measured[i]);
      x3.push_back(colls[i] / measured[i]);
      ones.push_back(1.0);
    }
    const std::vector<double> coef = nonneg_lstsq({x1, x2, x3}, ones);
    if (coef[0] > 0) a = coef[0], b = coef[1], c = coef[2];
  }
  fit.speed = 1 / a;
  fit.kernel_s = b;
  fit.collective_s = c;
  std::vector<double> err;
  for (size_t i = 0; i < measured.size(); ++i)
    err.push_back(std::abs((a * physics[i] + b * count[i] + c * colls[i]) / measured[i] - 1));
  fit.fit_error = median(err);
  return fit;
}

}  // namespace shardgym
