// ThreadRanks when a rank thread cannot be created: RankError naming the rank and the cause,
// the threads already started joined at once — it used to destroy running std::threads
// (std::terminate, exit 134).
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/live/launch/thread_ranks.h"

namespace shardgym::live {
namespace {

int threads_now() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

TEST(ThreadRanks, AnUnstartableRankIsNamedAndTheStartedOnesAreJoinedAtOnce) {
  // ThreadSanitizer's runtime starts a background thread of its own at the first
  // pthread_create; one thread started and joined first puts it in `before`.
  std::thread([] {}).join();
  const int before = threads_now();
  const auto t0 = std::chrono::steady_clock::now();
  WorldOptions o;
  o.timeout_s = 2.0;
  try {
    ThreadRanks ranks(4, [](CommWorld& w) { w.world().barrier(); }, o, /*refuse_start_rank=*/2);
    FAIL() << "rank 2's thread was refused, yet the launch went on";
  } catch (const RankError& e) {
    EXPECT_EQ(e.first_rank(), 2);
    EXPECT_EQ(std::string(e.what()).find("rank 2 failed: cannot start rank thread 2 of 4: "
                                         "injected fault (nostart): Resource temporarily "
                                         "unavailable"),
              0u)
        << e.what();
  }
  // Ranks 0 and 1 never reached the rendezvous: no timeout was waited out.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(threads_now(), before);
}

// A send to a peer that has closed its sockets must fail with EPIPE, not kill the process with
// SIGPIPE (a throwing rank sometimes ended `shardgym train` with exit 141).
TEST(ThreadRanks, RanksRunWithSigpipeIgnored) {
  run_threads(2, [](CommWorld& w) { w.world().barrier(); }, 2.0);
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
}

// A real limit: in a child process (gtest re-executes this test alone), the address space is
// capped a few thread stacks above what is in use, so std::thread fails partway through 64.
TEST(ThreadRanks, ARealThreadLimitEndsInRankErrorNotInTerminate) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::ifstream status("/proc/self/status");
        std::string key;
        double vm_kib = 0;
        while (status >> key) {
          if (key == "VmSize:") {
            status >> vm_kib;
            break;
          }
        }
        rlimit stack{};
        ::getrlimit(RLIMIT_STACK, &stack);
        const double per_thread = stack.rlim_cur == RLIM_INFINITY ? 8 << 20 : stack.rlim_cur;
        rlimit as{};
        as.rlim_cur = as.rlim_max = static_cast<rlim_t>(vm_kib * 1024 + 6.5 * per_thread);
        ::setrlimit(RLIMIT_AS, &as);
        try {
          ThreadRanks ranks(64, [](CommWorld&) {}, 2.0);
          std::fprintf(stderr, "all 64 threads started\n");
          ::_exit(2);
        } catch (const RankError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          ::_exit(std::string(e.what()).find("cannot start rank thread") != std::string::npos
                      ? 0
                      : 3);
        }
      },
      ::testing::ExitedWithCode(0), "failed: cannot start rank thread [0-9]+ of 64: Resource");
}

}  // namespace
}  // namespace shardgym::live
