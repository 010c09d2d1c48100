#include "env/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
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

}  // namespace
}  // namespace shardgym
