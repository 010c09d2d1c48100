// ReturnScale (agents/return_scale.h): Gymnasium's running statistic of the discounted return,
// and rewards over its standard deviation.
#include "agents/return_scale.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace shardgym {
namespace {

TEST(ReturnScale, VarianceIsThatOfEveryReturnWithThePriorsWeight) {
  // RunningMeanStd starts at mean 0, variance 1 with weight 1e-4; after N returns G_k its
  // mean and variance are those of the pooled sample.
  ReturnScale s;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> r(0.5, 2.0);
  const double gamma = 0.9;
  std::vector<double> returns;
  double g = 0;
  for (int k = 0; k < 500; ++k) {
    const double x = r(rng);
    const bool done = k % 37 == 36;
    s.scale(0, x, gamma, done);
    g = g * gamma + x;
    returns.push_back(g);
    if (done) g = 0;
  }
  const double c0 = 1e-4, n = static_cast<double>(returns.size());
  double sum = 0;
  for (double v : returns) sum += v;
  const double mean = sum / (n + c0);
  double m2 = c0 * (1 + mean * mean);
  for (double v : returns) m2 += (v - mean) * (v - mean);
  EXPECT_NEAR(s.mean, mean, 1e-9 * std::abs(mean));
  EXPECT_NEAR(s.var, m2 / (n + c0), 1e-9 * m2 / n);
  EXPECT_NEAR(s.count, n + c0, 1e-9);
}

TEST(ReturnScale, AScaledRewardDoesNotDependOnTheRewardsUnitOnceWarm) {
  // The same rewards in units 1000x larger give the same scaled rewards, once the prior's
  // weight is spent: what the learner sees is of order 1 whatever the env's unit.
  ReturnScale a, b;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> r(-1.0, 2.0);
  double worst = 0;
  for (int k = 0; k < 3000; ++k) {
    const double x = r(rng);
    const bool done = k % 100 == 99;
    const double sa = a.scale(0, x, 0.99, done), sb = b.scale(0, 1000 * x, 0.99, done);
    if (k >= 2000) worst = std::max(worst, std::abs(sa - sb) / std::max(std::abs(sa), 1e-3));
  }
  EXPECT_LT(worst, 1e-3);
  EXPECT_GT(a.var, 0.1);  // returns of a few units: the statistic moved off its prior
}

TEST(ReturnScale, EachEnvKeepsItsReturnAndAnEndedEpisodeStartsAfresh) {
  ReturnScale s;
  s.start_episodes(2);
  s.scale(0, 1.0, 0.5, false);
  s.scale(1, 4.0, 0.5, false);
  s.scale(0, 1.0, 0.5, false);
  EXPECT_DOUBLE_EQ(s.ret[0], 1.5);
  EXPECT_DOUBLE_EQ(s.ret[1], 4.0);
  s.scale(1, 2.0, 0.5, /*done=*/true);
  EXPECT_DOUBLE_EQ(s.ret[1], 0.0);
  s.start_episodes(2);
  EXPECT_DOUBLE_EQ(s.ret[0], 0.0);
  EXPECT_NEAR(s.count, 4 + 1e-4, 1e-12);  // the statistics stay
}

}  // namespace
}  // namespace shardgym
