// The live noise check (experiments/noise_gate.h): the verdict from paired measurements and
// the other processes' load, and the load figure itself against a process that really spins.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

#include "experiments/noise_gate.h"

namespace shardgym {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<std::pair<double, double>> pairs_off_by(double rel, int n) {
  std::vector<std::pair<double, double>> v;
  for (int i = 0; i < n; ++i) v.emplace_back(1.0 + i, (1.0 + i) * (1 + (i % 2 ? rel : -rel)));
  return v;
}

TEST(NoiseGate, VerdictFollowsTheMedianDisagreement) {
  const NoiseLimits limits;  // warn 10 %, refuse 20 %
  const NoiseReport quiet = judge_noise("x", pairs_off_by(0.03, 9), 0.0, 2, limits);
  EXPECT_EQ(quiet.level, NoiseLevel::kQuiet);
  EXPECT_EQ(quiet.pairs, 9);
  EXPECT_NEAR(quiet.disagreement, 0.03, 1e-12);
  EXPECT_FALSE(quiet.refused());
  EXPECT_EQ(noise_warning(quiet), "");

  const NoiseReport noisy = judge_noise("x", pairs_off_by(0.15, 9), 0.0, 2, limits);
  EXPECT_EQ(noisy.level, NoiseLevel::kNoisy);
  EXPECT_FALSE(noisy.refused());
  EXPECT_EQ(noise_warning(noisy).rfind("warning: the machine is noisy", 0), 0u);

  const NoiseReport bad = judge_noise("x", pairs_off_by(0.4, 9), 0.0, 2, limits);
  EXPECT_EQ(bad.level, NoiseLevel::kTooNoisy);
  EXPECT_TRUE(bad.refused());
  EXPECT_NE(noise_warning(bad).find("disagrees with itself by a median 40.0 % (refusal limit 20.0 %)"),
            std::string::npos)
      << noise_warning(bad);
  NoiseLimits allow = limits;
  allow.allow_noisy = true;
  EXPECT_FALSE(judge_noise("x", pairs_off_by(0.4, 9), 0.0, 2, allow).refused());
}

// The load is a share of the cores: 0.5 core is 25 % of 2 (a warning) and 3 % of 16.
TEST(NoiseGate, OtherProcessesLoadAloneCanRefuse) {
  const NoiseLimits limits;  // warn 10 %, refuse 30 % of the cores
  EXPECT_EQ(judge_noise("x", {}, 0.5, 2, limits).level, NoiseLevel::kNoisy);
  EXPECT_EQ(judge_noise("x", {}, 0.5, 16, limits).level, NoiseLevel::kQuiet);
  const NoiseReport r = judge_noise("x", pairs_off_by(0.01, 5), 1.2, 2, limits);
  EXPECT_EQ(r.level, NoiseLevel::kTooNoisy);
  EXPECT_NE(noise_warning(r).find("other processes kept 1.20 of 2 cores (60.0 %) busy"),
            std::string::npos)
      << noise_warning(r);
}

TEST(NoiseGate, NothingMeasuredIsSaidAndNeverRefused) {
  const NoiseReport r = judge_noise("the figure", {}, kNaN, 0, NoiseLimits{});
  EXPECT_EQ(r.level, NoiseLevel::kUnmeasured);
  EXPECT_FALSE(r.refused());
  EXPECT_NE(noise_line(r).find("not measured (the figure: no pairs)"), std::string::npos);
}

TEST(NoiseGate, BrokenPairsAreLeftOut) {
  const NoiseReport r = judge_noise(
      "x", {{1.0, 1.01}, {0.0, 5.0}, {kNaN, 1.0}, {1.0, std::numeric_limits<double>::infinity()},
            {-1.0, 2.0}, {2.0, 2.02}, {3.0, 3.03}},
      0.0, 2, NoiseLimits{});
  EXPECT_EQ(r.pairs, 3);
  EXPECT_EQ(r.level, NoiseLevel::kQuiet);
}

TEST(NoiseGate, ConsecutivePairs) {
  const auto p = consecutive_pairs({1, 2, 3});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1], std::make_pair(2.0, 3.0));
  EXPECT_TRUE(consecutive_pairs({1}).empty());
}

// A child process that spins for the whole window, not yet reaped when the window closes, is
// another process to this one: at least half a core of load (a whole one on an idle machine;
// the bound leaves room for a busy test machine, where others only add to it).
TEST(NoiseGate, ASpinningProcessIsSeenAsLoad) {
  const CpuSample from = sample_cpu();
  if (!from.ok) GTEST_SKIP() << "/proc/stat cannot be read here";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    volatile unsigned long x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const double load = other_cores(from, sample_cpu());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_GT(load, 0.5);
}

}  // namespace
}  // namespace shardgym
