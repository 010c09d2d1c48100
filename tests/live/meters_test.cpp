// Meters: per-rank allocator counting, RAPL reading (on a fake powercap tree), power model.
#include "runtime/live/driver/meters.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace shardgym::live {
namespace {

TEST(MemoryMeter, CountsTensorStorageForTheScopedRank) {
  MemoryMeter::install();
  ASSERT_TRUE(MemoryMeter::installed());
  MemoryMeter::Scope scope(3);
  const int64_t before = MemoryMeter::current_bytes(3);
  MemoryMeter::reset_peak(3);
  {
    at::Tensor t = at::empty({1000}, at::kDouble);
    EXPECT_EQ(MemoryMeter::current_bytes(3) - before, 8000);
    at::Tensor u = at::empty({500}, at::kFloat);
    EXPECT_EQ(MemoryMeter::current_bytes(3) - before, 10000);
  }
  EXPECT_EQ(MemoryMeter::current_bytes(3), before);
  EXPECT_EQ(MemoryMeter::peak_bytes(3) - before, 10000);
  MemoryMeter::reset_peak(3);
  EXPECT_EQ(MemoryMeter::peak_bytes(3), before);
}

TEST(MemoryMeter, RanksOnDifferentThreadsAreSeparateAndFreesGoBackToTheAllocator) {
  MemoryMeter::install();
  at::Tensor from_rank_5;
  const int64_t r4 = MemoryMeter::current_bytes(4), r5 = MemoryMeter::current_bytes(5);
  std::thread a([&] {
    MemoryMeter::Scope s(5);
    from_rank_5 = at::zeros({256}, at::kFloat);  // 1 KiB, kept alive past the thread
  });
  a.join();
  std::thread b([&] {
    MemoryMeter::Scope s(4);
    at::Tensor tmp = at::zeros({128}, at::kFloat);
    EXPECT_EQ(MemoryMeter::current_bytes(4) - r4, 512);
  });
  b.join();
  EXPECT_EQ(MemoryMeter::current_bytes(4), r4);
  EXPECT_EQ(MemoryMeter::current_bytes(5) - r5, 1024);
  {
    MemoryMeter::Scope s(7);  // freeing on another rank's thread still credits rank 5
    from_rank_5 = at::Tensor();
  }
  EXPECT_EQ(MemoryMeter::current_bytes(5), r5);
}

// Each live run's rank threads count in slots of their own: leases are disjoint while both
// live, a released block is taken again, and a request no block can serve is refused.
TEST(MemoryMeter, LeasesHoldDisjointSlots) {
  std::optional<MemoryMeter::Lease> a(std::in_place, 4);
  const MemoryMeter::Lease b(4);
  EXPECT_TRUE(b.base() >= a->base() + 4 || b.base() + 4 <= a->base())
      << "bases " << a->base() << " and " << b.base();
  const int freed = a->base();
  a.reset();
  const MemoryMeter::Lease c(4);
  EXPECT_EQ(c.base(), freed);
  EXPECT_THROW(MemoryMeter::Lease(MemoryMeter::kMaxRanks), std::runtime_error);
  EXPECT_THROW(MemoryMeter::Lease(0), std::invalid_argument);
}

TEST(MemoryMeter, ScopesNestAndRawAllocationWorks) {
  MemoryMeter::install();
  EXPECT_EQ(MemoryMeter::current_rank(), MemoryMeter::kUnattributed);
  {
    MemoryMeter::Scope outer(1);
    {
      MemoryMeter::Scope inner(2);
      EXPECT_EQ(MemoryMeter::current_rank(), 2);
    }
    EXPECT_EQ(MemoryMeter::current_rank(), 1);
    const int64_t before = MemoryMeter::current_bytes(1);
    void* p = c10::GetCPUAllocator()->raw_allocate(100);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "keeps c10's alignment";
    EXPECT_EQ(MemoryMeter::current_bytes(1) - before, 100);
    c10::GetCPUAllocator()->raw_deallocate(p);
    EXPECT_EQ(MemoryMeter::current_bytes(1), before);
  }
  EXPECT_EQ(MemoryMeter::current_rank(), MemoryMeter::kUnattributed);
  EXPECT_THROW(MemoryMeter::Scope(-2), std::invalid_argument);
  EXPECT_THROW(MemoryMeter::peak_bytes(MemoryMeter::kMaxRanks), std::invalid_argument);
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(EnergyMeter, ReadsRaplPackagesOnlyAndHandlesWrapAround) {
  const std::string dir = ::testing::TempDir() + "fake_powercap";
  ::mkdir(dir.c_str(), 0755);
  ::mkdir((dir + "/intel-rapl:0").c_str(), 0755);
  ::mkdir((dir + "/intel-rapl:0:0").c_str(), 0755);  // a subzone: must be ignored
  write_file(dir + "/intel-rapl:0/max_energy_range_uj", "10000000\n");
  write_file(dir + "/intel-rapl:0/energy_uj", "1000000\n");
  write_file(dir + "/intel-rapl:0:0/energy_uj", "5\n");
  EnergyMeter m({1, 2}, dir);
  EXPECT_EQ(m.source(), "rapl");
  m.start();
  write_file(dir + "/intel-rapl:0/energy_uj", "3500000\n");
  EXPECT_DOUBLE_EQ(m.stop(1.0, {1.0}), 2.5);
  write_file(dir + "/intel-rapl:0/energy_uj", "9000000\n");
  m.start();
  write_file(dir + "/intel-rapl:0/energy_uj", "500000\n");  // wrapped past 10 J
  EXPECT_DOUBLE_EQ(m.stop(1.0, {1.0}), 1.5);
}

TEST(EnergyMeter, FallsBackToThePowerModel) {
  EnergyMeter m({10, 30}, ::testing::TempDir() + "no_such_powercap");
  EXPECT_EQ(m.source(), "model");
  m.start();
  // Two ranks, 2 s: 2·10·2 + 20·(1.0 + 0.5) = 70 J.
  EXPECT_DOUBLE_EQ(m.stop(2.0, {1.0, 0.5}), 70.0);
  // Busy time above the wall time is clamped (a rank cannot be busy longer than it ran).
  EXPECT_DOUBLE_EQ(EnergyMeter::model_energy({10, 30}, 1.0, {5.0}), 30.0);
}

TEST(Clocks, ThreadCpuTimeCountsWorkNotSleep) {
  const double c0 = thread_cpu_now_s();
  Stopwatch sw;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double slept_cpu = thread_cpu_now_s() - c0;
  EXPECT_GE(sw.elapsed_s(), 0.05);
  EXPECT_LT(slept_cpu, 0.04);  // sleeping costs (almost) no CPU time
  const double c1 = thread_cpu_now_s();
  volatile double x = 0;
  while (thread_cpu_now_s() - c1 < 0.02) x = x + 1;
  EXPECT_GE(thread_cpu_now_s() - c1, 0.02);
}

}  // namespace
}  // namespace shardgym::live
