// Live figures come with their noise (docs/robustness.md, "A machine too noisy to measure on").
//
// A live figure is only as good as the machine is quiet. Each live command measures two things
// while it runs and judges them against documented limits:
//   - the live run's agreement with itself: the same plan measured twice in one run, as the
//     median over pairs of |second / first − 1| (validate-sim: every plan's second visit;
//     calibrate: each uniform plan pass to pass, after the drift reference; eval: the mean step
//     of the static Megatron-LM plan over the first half of each episode against the second
//     half; bench live: back-to-back steps);
//   - the CPU time other processes took while it ran, as a share of the cores this process
//     may run on (/proc/stat's busy time of those cores less this process's and its reaped
//     children's, over the wall time).
// A figure past the warning limit is printed with a warning; past the refusal limit the
// command fails with kExitTooNoisy (calibrate writes no file) unless --allow-noisy. The
// limits and the measurements they come from are in docs/robustness.md.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace shardgym {

// Exit status of a live command refused because the machine was too noisy (0 ok, 1 failure,
// 2 bad input).
constexpr int kExitTooNoisy = 3;

struct NoiseLimits {
  // Self-disagreement, median |b/a − 1| over paired visits. On a quiet 2-core host the live
  // quickstart's second visits disagreed by a median 3.8–7.5 % (7 runs), with two compiles
  // running by 10–12 % (docs/robustness.md has the runs).
  double warn = 0.10;
  double refuse = 0.20;
  // Other processes' CPU time as a share of the cores this process may run on, averaged over
  // the run: 0 on the quiet host; one busy process or compile 38 % of its 2 cores, two
  // compiles 58 %. A steady load hardly moves the self-agreement but slows every plan: what
  // a calibration or a step error against one measures is then the load.
  double load_warn = 0.10;
  double load_refuse = 0.30;
  bool allow_noisy = false;  // never refuse; the warning stays
};

// Busy CPU time of the whole machine and of this process (with its reaped children), and the
// wall clock, at one moment. ok = false where /proc/stat cannot be read (then no load figure).
struct CpuSample {
  double machine_busy_s = 0, own_s = 0, wall_s = 0;
  int cores = 0;  // CPUs of the affinity mask that /proc/stat lists
  bool ok = false;
};
CpuSample sample_cpu();
// Cores other processes kept busy between two samples (≥ 0); NaN when unknown.
double other_cores(const CpuSample& from, const CpuSample& to);

enum class NoiseLevel { kUnmeasured, kQuiet, kNoisy, kTooNoisy };

struct NoiseReport {
  std::string figure;          // what was paired ("second visit of every plan", ...)
  int pairs = 0;
  double disagreement = 0;     // median |b/a − 1| (valid when pairs > 0)
  double p90 = 0;
  double other_cores = 0;      // NaN: unknown
  int cores = 0;               // of this process's affinity mask
  double other_share() const { return cores > 0 ? other_cores / cores : other_cores; }
  NoiseLevel level = NoiseLevel::kUnmeasured;
  std::vector<std::string> reasons;  // why it is noisy or too noisy
  NoiseLimits limits;
  bool refused() const { return level == NoiseLevel::kTooNoisy && !limits.allow_noisy; }
};

// Judges `pairs` (first, second measurement of the same thing; non-positive or non-finite
// pairs are left out) and the other processes' load (`other_cores` of `cores`). No pairs and
// no load: kUnmeasured.
NoiseReport judge_noise(const std::string& figure, const std::vector<std::pair<double, double>>& pairs,
                        double other_cores, int cores, const NoiseLimits& limits);

// Consecutive elements as pairs: (x0,x1), (x1,x2), ...
std::vector<std::pair<double, double>> consecutive_pairs(const std::vector<double>& xs);

// "live noise: ..." — one line, with the verdict; and the warning or refusal paragraph ("" when
// quiet).
std::string noise_line(const NoiseReport& r);
std::string noise_warning(const NoiseReport& r);
std::string noise_json(const NoiseReport& r);  // an object

// Runs from construction to judge(): the load figure of a command.
class NoiseWatch {
 public:
  NoiseWatch() : start_(sample_cpu()) {}
  NoiseReport judge(const std::string& figure, const std::vector<std::pair<double, double>>& pairs,
                    const NoiseLimits& limits) const {
    const CpuSample now = sample_cpu();
    return judge_noise(figure, pairs, other_cores(start_, now), now.cores, limits);
  }

 private:
  CpuSample start_;
};

}  // namespace shardgym
