// Seeded multiplicative noise on simulated times (docs/design.md §4, "Noise").
//
// Each factor is log-normal with mean 1: exp(σ·z − σ²/2), z ~ N(0, 1). To keep a simulated
// step within a few microseconds (hundreds of factors per step), z is drawn by inverse CDF on
// a grid of 4096 equiprobable levels (|z| ≤ 3.5): one 64-bit draw of std::mt19937_64 yields
// five factors. The table is rescaled so that its mean is exactly 1, so the noise-free
// estimate is the expectation of the noisy measurement. σ = 0 returns 1 and draws nothing.
//
// The table (32 KB) depends on σ alone, so generators of the same σ share one immutable copy
// (a process-wide index by σ): 64 envs of a vector env then read one table instead of 64,
// which together filled a core's L2 cache. Each generator keeps its own random state.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace shardgym {

class LogNormalNoise {
 public:
  static constexpr int kBits = 12;
  static constexpr int kLevels = 1 << kBits;
  static constexpr int kPerDraw = 64 / kBits;

  explicit LogNormalNoise(double sigma = 0);

  void seed(uint64_t s) {
    rng_.seed(s);
    left_ = 0;
  }
  double sigma() const { return sigma_; }

  double next() {
    if (sigma_ <= 0) return 1.0;
    if (left_ == 0) bits_ = rng_(), left_ = kPerDraw;
    const double f = levels_[bits_ & (kLevels - 1)];
    bits_ >>= kBits;
    --left_;
    return f;
  }

 private:
  double sigma_ = 0;
  std::shared_ptr<const std::vector<double>> table_;  // kLevels factors, shared by σ
  const double* levels_ = nullptr;                    // table_->data()
  std::mt19937_64 rng_;
  uint64_t bits_ = 0;
  int left_ = 0;
};

// Φ⁻¹(p) for p in (0, 1) (Acklam's rational approximation refined by one Newton step).
double inverse_normal_cdf(double p);

}  // namespace shardgym
