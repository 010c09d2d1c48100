#include "experiments/noise_gate.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace shardgym {
namespace {

double seconds(const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); }

// Busy CPU time of the cores this process may run on: the "cpuN" lines of /proc/stat for the
// CPUs of its affinity mask (in a container the file counts the host's every core), every
// field but idle and iowait (guest time is already inside user and nice).
bool machine_busy_s(double* out, int* cores) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) != 0) return false;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return false;
  char line[512];
  unsigned long long busy = 0;
  int counted = 0;
  while (std::fgets(line, sizeof line, f)) {
    int cpu = -1;
    unsigned long long v[8] = {0};
    const int n = std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0],
                              &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    if (n < 5 || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask)) continue;
    // user nice system idle iowait irq softirq steal
    busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    ++counted;
  }
  std::fclose(f);
  const double tick = double(::sysconf(_SC_CLK_TCK));
  if (counted == 0 || !(tick > 0)) return false;
  *out = double(busy) / tick;
  *cores = counted;
  return true;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string pct(double x) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << 100 * x << " %";
  return s.str();
}

std::string fixed2(double x) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  s << x;
  return s.str();
}

// "0.77 of 2 cores (38.5 %)"
std::string cores_text(const NoiseReport& r) {
  if (r.cores <= 0) return fixed2(r.other_cores) + " cores";
  return fixed2(r.other_cores) + " of " + std::to_string(r.cores) + " cores (" +
         pct(r.other_share()) + ")";
}

const char* level_name(NoiseLevel l) {
  switch (l) {
    case NoiseLevel::kQuiet: return "quiet";
    case NoiseLevel::kNoisy: return "noisy";
    case NoiseLevel::kTooNoisy: return "too noisy";
    default: return "unmeasured";
  }
}

}  // namespace

CpuSample sample_cpu() {
  CpuSample s;
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  s.own_s = seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) +
            seconds(children.ru_stime);
  s.ok = machine_busy_s(&s.machine_busy_s, &s.cores);
  return s;
}

double other_cores(const CpuSample& from, const CpuSample& to) {
  const double wall = to.wall_s - from.wall_s;
  if (!from.ok || !to.ok || !(wall > 0.5)) return std::numeric_limits<double>::quiet_NaN();
  const double other = (to.machine_busy_s - from.machine_busy_s) - (to.own_s - from.own_s);
  return std::max(0.0, other / wall);
}

std::vector<std::pair<double, double>> consecutive_pairs(const std::vector<double>& xs) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 1; i < xs.size(); ++i) out.emplace_back(xs[i - 1], xs[i]);
  return out;
}

NoiseReport judge_noise(const std::string& figure, const std::vector<std::pair<double, double>>& pairs,
                        double other, int cores, const NoiseLimits& limits) {
  NoiseReport r;
  r.figure = figure;
  r.limits = limits;
  r.other_cores = other;
  r.cores = cores;
  std::vector<double> d;
  for (const auto& [a, b] : pairs) {
    if (std::isfinite(a) && std::isfinite(b) && a > 0 && b > 0) d.push_back(std::fabs(b / a - 1));
  }
  r.pairs = static_cast<int>(d.size());
  const bool have_load = std::isfinite(other);
  if (d.empty() && !have_load) return r;
  r.level = NoiseLevel::kQuiet;
  auto raise = [&r](NoiseLevel l, const std::string& why) {
    r.level = std::max(r.level, l);
    r.reasons.push_back(why);
  };
  if (!d.empty()) {
    r.disagreement = median_of(d);
    std::sort(d.begin(), d.end());
    r.p90 = d[std::min(d.size() - 1, static_cast<size_t>(std::ceil(0.9 * double(d.size())) - 1))];
    if (r.disagreement > limits.refuse) {
      raise(NoiseLevel::kTooNoisy, "the live run disagrees with itself by a median " +
                                       pct(r.disagreement) + " (refusal limit " +
                                       pct(limits.refuse) + ")");
    } else if (r.disagreement > limits.warn) {
      raise(NoiseLevel::kNoisy, "the live run disagrees with itself by a median " +
                                    pct(r.disagreement) + " (warning limit " + pct(limits.warn) +
                                    ")");
    }
  }
  if (have_load) {
    const double share = r.other_share();
    const std::string load = "other processes kept " + cores_text(r) + " busy while it ran (";
    if (share > limits.load_refuse) {
      raise(NoiseLevel::kTooNoisy, load + "refusal limit " + pct(limits.load_refuse) + ")");
    } else if (share > limits.load_warn) {
      raise(NoiseLevel::kNoisy, load + "warning limit " + pct(limits.load_warn) + ")");
    }
  }
  return r;
}

std::string noise_line(const NoiseReport& r) {
  std::ostringstream s;
  s << "live noise: " << level_name(r.level);
  if (r.pairs > 0) {
    s << "; agreement with itself (" << r.figure << ", " << r.pairs << " pairs): median "
      << pct(r.disagreement) << ", p90 " << pct(r.p90);
  } else {
    s << "; agreement with itself not measured (" << r.figure << ": no pairs)";
  }
  if (std::isfinite(r.other_cores)) s << "; other processes " << cores_text(r);
  s << " [limits: warn " << pct(r.limits.warn) << " / " << pct(r.limits.load_warn)
    << " of the cores, refuse " << pct(r.limits.refuse) << " / " << pct(r.limits.load_refuse)
    << "]\n";
  return s.str();
}

std::string noise_warning(const NoiseReport& r) {
  if (r.level != NoiseLevel::kNoisy && r.level != NoiseLevel::kTooNoisy) return "";
  std::ostringstream s;
  s << (r.level == NoiseLevel::kTooNoisy ? "the machine is too noisy for these figures: "
                                         : "warning: the machine is noisy; read these figures with care: ");
  for (size_t i = 0; i < r.reasons.size(); ++i) s << (i ? "; " : "") << r.reasons[i];
  if (r.level == NoiseLevel::kTooNoisy) {
    s << (r.limits.allow_noisy ? ". Kept because of --allow-noisy."
                               : ". Measure on a quiet machine, or pass --allow-noisy to keep them"
                                 " (exit status 3 says they were refused).");
  }
  s << "\n";
  return s.str();
}

std::string noise_json(const NoiseReport& r) {
  std::ostringstream s;
  s.precision(6);
  s << "{\"level\": \"" << level_name(r.level) << "\", \"figure\": \"" << r.figure
    << "\", \"pairs\": " << r.pairs << ", \"median\": " << r.disagreement << ", \"p90\": " << r.p90
    << ", \"other_cores\": ";
  if (std::isfinite(r.other_cores)) s << r.other_cores; else s << "null";
  s << ", \"cores\": " << r.cores;
  s << ", \"warn\": " << r.limits.warn << ", \"refuse\": " << r.limits.refuse
    << ", \"load_warn\": " << r.limits.load_warn << ", \"load_refuse\": " << r.limits.load_refuse
    << ", \"refused\": " << (r.refused() ? "true" : "false") << "}";
  return s.str();
}

}  // namespace shardgym
