// What a live world of P ranks asks of this machine, checked before any rank starts.
//
// A world that cannot fit fails late and badly: 1024 rank threads hung in Gloo's connect far
// past timeout_s, 16 ranks under `ulimit -n 100` failed after 5× the timeout blaming
// "Cannot resolve 127.0.0.1", a rank thread that could not be created aborted the process.
// So the config loader (experiments/config.cpp, file and line) and LiveRun (before the first
// rank starts) ask why_world_does_not_fit() and refuse with the limit, its value and the need:
//
//   file descriptors  thread launch, one process:  kFdsBase + kFdsPerRank·P + Σ_g |g|(|g|−1)
//                     process launch, each rank:   kFdsBase + kFdsPerRank + Σ_{g∋r} (|g|−1)
//                       (g: standard_group_sets(P) with |g| > 1; a Gloo pair is one socket
//                       per end, and with thread ranks both ends are in this process)
//                     the launcher of processes:   kFdsBase + 2·P (a pipe, a store socket each)
//                     against RLIMIT_NOFILE (ulimit -n)
//   threads           kThreadsBase + P·(1 + threads_per_rank + groups of a rank with |g| > 1)
//                     (the rank, Gloo's event loop, threads_per_rank − 1 intra-op threads,
//                     one Gloo worker per group; one process holds them all with thread
//                     launch) against RLIMIT_NPROC (ulimit -u)
//   cores             P·threads_per_rank ≤ kMaxRankThreadsPerCore · hardware_concurrency
//   memory            P·(live_memory_estimate of the plan) ≤ MemAvailable (/proc/meminfo);
//                     thread launch also: VmSize + P·(estimate + thread stack) ≤ RLIMIT_AS
// The constants and where they come from are in launch/world_limits.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace shardgym::live {

// This process's limits; -1 where there is none (unlimited, or not readable).
struct HostLimits {
  int64_t open_files = -1;     // RLIMIT_NOFILE, soft
  int64_t threads = -1;        // RLIMIT_NPROC, soft (counts threads of the user)
  double address_space = -1;   // RLIMIT_AS, soft, bytes
  double address_space_used = 0;  // VmSize of this process now, bytes
  double memory_available = -1;   // MemAvailable, bytes
  double thread_stack = 8 << 20;  // RLIMIT_STACK: what a new thread reserves (8 MiB if unlimited)
  int cores = 0;                  // std::thread::hardware_concurrency (0: unknown)
};
HostLimits host_limits();

struct LiveWorld {
  int ranks = 1;
  bool thread_launch = true;  // live.launch: threads (one process) or processes
  int threads_per_rank = 1;
  double memory_per_rank = 0;  // bytes, live_memory_estimate(...).total(); 0: not checked
};

struct WorldNeeds {
  int64_t fds = 0;           // in the process that holds the most (see the table above)
  int64_t threads = 0;       // in the process that holds the most
  int64_t busy_threads = 0;  // P·threads_per_rank, over the whole host
  double memory = 0;         // over the whole host
  double address_space = 0;  // in one process (thread launch; 0 otherwise)
};
WorldNeeds world_needs(const LiveWorld& world);

// "" when the world fits; else every limit it exceeds, e.g. "1024 rank threads need about
// 2.1M file descriptors; this process may open 1024 (ulimit -n); raise it or use fewer ranks".
std::string why_world_does_not_fit(const LiveWorld& world, const HostLimits& host);

}  // namespace shardgym::live
