#include "runtime/live/launch/world_limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/live/launch/group_sets.h"

namespace shardgym::live {
namespace {

// Measured with tests/live/world_limits_test.cpp (WorldLimits.FormulaBoundsTheMeasuredFds...),
// which counts /proc/self/fd and /proc/self/task of a thread world of P ranks after
// create_standard_groups, minus the counts before the launch (LibTorch 2.x, Gloo over TCP):
//   P = 2: +4 fds, +6 threads;  P = 4: +24 fds, +20 threads;  P = 8: +136 fds, +64 threads.
// Σ_g |g|(|g|−1) is 2, 20, 128: the pair sockets explain all but one descriptor per rank (the
// Gloo device's listening socket), so kFdsPerRank = 1. The threads are P·(2 + groups of a
// rank) exactly: the rank, its Gloo device's event loop, one worker per group; a rank's
// intra-op pool adds threads_per_rank − 1 when it computes. kFdsBase is headroom for what the
// process holds besides (stdio, the trace file, libraries' descriptors).
constexpr int64_t kFdsPerRank = 1;
constexpr int64_t kFdsBase = 64;
// Threads besides the ranks' own: the launcher, torch's inter-op pool, headroom.
constexpr int64_t kThreadsBase = 32;
// Rank threads (times their intra-op threads) per core beyond which a run is refused. Not a
// measurement but a judgement: every rank works in each step, so P ranks on C cores make a
// step about P/C times slower, and a peer descheduled for longer than timeout_s looks dead;
// 16 per core admits every config and test here (8 ranks on 2 cores is 4) and refuses the
// 1024-rank run that hung on 2 cores.
constexpr int64_t kMaxRankThreadsPerCore = 16;

int64_t soft_limit(int resource) {
  rlimit r{};
  if (::getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<int64_t>(r.rlim_cur);
}

// "Name:   123 kB" → 123·1024; -1 when absent.
double proc_kib(const char* file, const std::string& name) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size() + 1, name + ":") != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    double kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

std::string about(double x) {
  char buf[32];
  if (x >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1fM", x / 1e6);
  } else if (x >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.0fk", x / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", x);
  }
  return buf;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

HostLimits host_limits() {
  HostLimits h;
  h.open_files = soft_limit(RLIMIT_NOFILE);
  h.threads = soft_limit(RLIMIT_NPROC);
  const int64_t as = soft_limit(RLIMIT_AS);
  h.address_space = as < 0 ? -1 : static_cast<double>(as);
  h.address_space_used = std::max(0.0, proc_kib("/proc/self/status", "VmSize"));
  h.memory_available = proc_kib("/proc/meminfo", "MemAvailable");
  const int64_t stack = soft_limit(RLIMIT_STACK);
  if (stack > 0) h.thread_stack = static_cast<double>(stack);
  h.cores = static_cast<int>(std::thread::hardware_concurrency());
  return h;
}

WorldNeeds world_needs(const LiveWorld& w) {
  const int p = w.ranks;
  // Per rank r: the peers it has a pair with, and its groups with a worker thread.
  std::vector<int64_t> peers(p, 0), groups(p, 0);
  int64_t pair_ends = 0;
  for (const auto& g : standard_group_sets(p)) {
    const int64_t k = static_cast<int64_t>(g.size());
    if (k < 2) continue;
    pair_ends += k * (k - 1);
    for (int r : g) peers[r] += k - 1, groups[r] += 1;
  }
  int64_t max_peers = 0, max_groups = 0;
  for (int r = 0; r < p; ++r) {
    max_peers = std::max(max_peers, peers[r]);
    max_groups = std::max(max_groups, groups[r]);
  }
  WorldNeeds n;
  const int64_t rank_threads = 1 + w.threads_per_rank + max_groups;
  if (w.thread_launch) {
    n.fds = kFdsBase + kFdsPerRank * p + pair_ends;
    n.threads = kThreadsBase + p * rank_threads;
    n.address_space = p * w.memory_per_rank;
  } else {
    n.fds = std::max(kFdsBase + kFdsPerRank + max_peers, kFdsBase + 2 * int64_t{p});
    n.threads = kThreadsBase + rank_threads;
  }
  n.busy_threads = int64_t{p} * w.threads_per_rank;
  n.memory = p * w.memory_per_rank;
  return n;
}

std::string why_world_does_not_fit(const LiveWorld& w, const HostLimits& h) {
  const WorldNeeds n = world_needs(w);
  const std::string who = std::to_string(w.ranks) + (w.thread_launch ? " rank threads" : " rank processes");
  const std::string holder = w.thread_launch ? "this process" : "each rank process";
  std::vector<std::string> why;
  if (h.open_files >= 0 && n.fds > h.open_files) {
    why.push_back(who + " need about " + about(double(n.fds)) + " file descriptors in " + holder +
                  "; it may open " + std::to_string(h.open_files) + " (ulimit -n)");
  }
  if (h.threads >= 0 && n.threads > h.threads) {
    why.push_back(who + " need about " + about(double(n.threads)) + " threads in " + holder +
                  "; this user may run " + std::to_string(h.threads) + " (ulimit -u)");
  }
  if (h.cores > 0 && n.busy_threads > kMaxRankThreadsPerCore * h.cores) {
    why.push_back(who + " × live.threads_per_rank " + std::to_string(w.threads_per_rank) + " = " +
                  std::to_string(n.busy_threads) + " busy threads on " + std::to_string(h.cores) +
                  " cores; at most " + std::to_string(kMaxRankThreadsPerCore) +
                  " per core are allowed, beyond that descheduled peers look dead to timeout_s");
  }
  if (h.memory_available >= 0 && n.memory > h.memory_available) {
    why.push_back(who + " need about " + gib(n.memory) + " (live_memory_estimate × ranks); " +
                  gib(h.memory_available) + " is available (MemAvailable)");
  }
  if (w.thread_launch && h.address_space >= 0) {
    const double need = h.address_space_used + n.address_space + w.ranks * h.thread_stack;
    if (need > h.address_space) {
      why.push_back(who + " need about " + gib(need) + " of address space (" +
                    gib(h.address_space_used) + " in use, " + gib(h.thread_stack) +
                    " stack per thread, the model's estimate per rank); this process may map " +
                    gib(h.address_space) + " (ulimit -v)");
    }
  }
  if (why.empty()) return "";
  std::string out;
  for (const auto& s : why) out += (out.empty() ? "" : "; ") + s;
  return out + "; raise the limit or use fewer ranks";
}

}  // namespace shardgym::live
