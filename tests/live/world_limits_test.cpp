// What a world of P ranks needs (runtime/live/launch/world_limits.h): the file-descriptor formula
// against descriptors counted in a real thread world, and refusals that name the limit.
#include <dirent.h>

#include <atomic>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/live/comm/gloo.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/launch/world_limits.h"

namespace shardgym::live {
namespace {

int count_entries(const char* dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// The origin of launch/world_limits.cpp's constants: descriptors and threads a thread world of P
// ranks adds once every standard group exists. The formula must bound them, and not by much.
TEST(WorldLimits, FormulaBoundsTheMeasuredFdsAndThreads) {
  for (int p : {2, 4, 8}) {
    const int fds0 = count_entries("/proc/self/fd");
    const int tasks0 = count_entries("/proc/self/task");
    std::atomic<int> fds{0}, tasks{0};
    run_threads(
        p,
        [&](CommWorld& w) {
          create_standard_groups(w);
          w.world().barrier();
          if (w.rank() == 0) {
            fds = count_entries("/proc/self/fd");
            tasks = count_entries("/proc/self/task");
          }
          w.world().barrier();
        },
        2.0);
    LiveWorld world;
    world.ranks = p;
    const WorldNeeds need = world_needs(world);
    const int added_fds = fds - fds0, added_threads = tasks - tasks0;
    std::cout << "P = " << p << ": +" << added_fds << " fds (formula " << need.fds << "), +"
              << added_threads << " threads (formula " << need.threads << ")\n";
    EXPECT_LE(added_fds, need.fds) << p;
    EXPECT_LE(added_threads, need.threads) << p;
    // Not a loose bound: beyond the fixed headroom, within one descriptor per rank.
    EXPECT_GE(added_fds + 64 + p, need.fds) << p;
    EXPECT_EQ(count_entries("/proc/self/fd"), fds0) << "descriptors left open, P = " << p;
  }
}

HostLimits unlimited() {
  HostLimits h;
  h.cores = 2;
  return h;
}

TEST(WorldLimits, RefusalsNameTheLimitItsValueAndTheNeed) {
  LiveWorld w;
  EXPECT_EQ(why_world_does_not_fit(w, unlimited()), "");

  // 16 ranks under `ulimit -n 100` used to fail after 5× the timeout blaming name resolution.
  HostLimits h = unlimited();
  h.open_files = 100;
  w.ranks = 16;
  std::string why = why_world_does_not_fit(w, h);
  EXPECT_NE(why.find("16 rank threads need about"), std::string::npos) << why;
  EXPECT_NE(why.find("file descriptors in this process; it may open 100 (ulimit -n)"),
            std::string::npos)
      << why;

  // 1024 ranks on 2 cores hung in Gloo's connect: refused for descriptors and cores.
  h.open_files = 1024;
  w.ranks = 1024;
  why = why_world_does_not_fit(w, h);
  EXPECT_NE(why.find("1024 rank threads need about 4.1M file descriptors"), std::string::npos)
      << why;
  EXPECT_NE(why.find("busy threads on 2 cores"), std::string::npos) << why;
  EXPECT_NE(why.find("raise the limit or use fewer ranks"), std::string::npos) << why;

  // Process launch: each rank holds its own pairs only (16 ranks: 107 at most, the launcher
  // 96), where one process of 16 rank threads needs 752.
  w.thread_launch = false;
  w.ranks = 16;
  h.open_files = 110;
  EXPECT_EQ(why_world_does_not_fit(w, h), "");

  h = unlimited();
  w = LiveWorld();
  w.ranks = 4;
  w.memory_per_rank = 1024.0 * 1024 * 1024;
  h.memory_available = 2 * w.memory_per_rank;
  why = why_world_does_not_fit(w, h);
  EXPECT_NE(why.find("4.00 GiB (live_memory_estimate × ranks); 2.00 GiB is available"),
            std::string::npos)
      << why;

  h = unlimited();
  w.memory_per_rank = 0;
  h.address_space = 64.0 * 1024 * 1024;
  h.address_space_used = 40.0 * 1024 * 1024;
  h.thread_stack = 8.0 * 1024 * 1024;
  why = why_world_does_not_fit(w, h);
  EXPECT_NE(why.find("of address space"), std::string::npos) << why;
  EXPECT_NE(why.find("(ulimit -v)"), std::string::npos) << why;

  h = unlimited();
  h.threads = 20;
  why = why_world_does_not_fit(w, h);
  EXPECT_NE(why.find("threads in this process; this user may run 20 (ulimit -u)"),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace shardgym::live
