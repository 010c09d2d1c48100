#include "env/thread_pool.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace shardgym {
namespace {

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int n : {0, 1, 3, 17, 100}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](int i) { hits[i].fetch_add(1); });
      for (int i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads " << threads;
    }
  }
}

TEST(ThreadPool, ManyLoopsInARowReuseTheWorkers) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int loop = 0; loop < 2000; ++loop) {
    pool.parallel_for(5, [&](int i) { sum.fetch_add(i + 1); });
  }
  EXPECT_EQ(sum.load(), 2000L * 15);
}

TEST(ThreadPool, RethrowsTheLowestFailingIndexAfterRunningAll) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(8);
    try {
      pool.parallel_for(8, [&](int i) {
        hits[i].fetch_add(1);
        if (i == 2 || i == 6) throw std::runtime_error("task " + std::to_string(i));
      });
      FAIL() << "the exception must reach the caller";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "task 2");
    }
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    // Still usable afterwards.
    std::atomic<int> count{0};
    pool.parallel_for(4, [&](int) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 4);
  }
}

TEST(ThreadPool, DefaultSizeIsAtLeastOne) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
}

// A worker that cannot be created ends the constructor with a named error, the workers
// already started joined (a destroyed joinable std::thread used to std::terminate the process).
TEST(ThreadPool, AThreadThatCannotStartIsANamedError) {
  try {
    ThreadPool pool(4, /*refuse_thread=*/2);
    ADD_FAILURE() << "the pool started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start worker thread 2 of 3"), std::string::npos)
        << e.what();
  }
}

// The same under a real limit: in a child whose address space leaves room for a few thread
// stacks only, a pool of 256 threads fails with the named error, at once. The child reports
// through its exit status: 0 named error, 1 other outcome; a signal (std::terminate) or a
// hang (killed after 30 s) fails the test.
TEST(ThreadPool, AddressSpaceLimitGivesTheNamedError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer cannot run under an address-space limit (its shadow memory)";
#endif
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t now = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE);
    rlimit lim{now + (64u << 20), now + (64u << 20)};
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
    try {
      ThreadPool pool(256);
      _exit(2);  // every thread started: the limit did not bite
    } catch (const std::runtime_error& e) {
      _exit(std::strstr(e.what(), "cannot start worker thread") ? 0 : 1);
    } catch (...) {
      _exit(1);
    }
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "the pool hung when a thread could not start";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "child ended by signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 2 || WEXITSTATUS(status) == 3)
    GTEST_SKIP() << "the address-space limit did not stop thread creation here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace shardgym
