// Ranks as processes over a loopback TCPStore: the launcher with a plain collective worker
// (tests/live/comm_worker.cpp) and the torchrun-style variables.
#include <signal.h>

#include <gtest/gtest.h>

#include "runtime/live/launch/process_ranks.h"

namespace shardgym::live {
namespace {

TEST(RunProcesses, FourRanksMeetThroughTheTcpStore) {
  const auto results = run_processes(4, {SHARDGYM_TEST_COMM_WORKER, "ok"}, 20);
  ASSERT_EQ(results.size(), 4u);
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ": " << r.output;
}

// The workers' collective timeout (comm_worker.cpp) is 20 s; peers that stop within a few
// seconds of the failing rank did not wait for it, they saw its connections close.
constexpr double kPromptS = 5;

TEST(RunProcesses, AThrowingRankIsNamedAndStopsTheOthers) {
  const auto results = run_processes(4, {SHARDGYM_TEST_COMM_WORKER, "throw"}, 20);
  EXPECT_EQ(results[2].exit_code, 1);
  EXPECT_NE(results[2].output.find("rank 2 failed: worker fault"), std::string::npos)
      << results[2].output;
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(results[r].exit_code, 1) << results[r].output;
    EXPECT_NE(results[r].output.find("rank " + std::to_string(r) + " failed: rank " +
                                     std::to_string(r) + ": all_gather on world[0,1,2,3] failed"),
              std::string::npos)
        << results[r].output;
    EXPECT_LT(results[r].exit_s - results[2].exit_s, kPromptS);
  }
}

TEST(RunProcesses, AKilledRankStopsTheOthers) {
  const auto results = run_processes(4, {SHARDGYM_TEST_COMM_WORKER, "die"}, 20);
  EXPECT_EQ(results[2].exit_code, -SIGKILL);
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(results[r].exit_code, 1) << results[r].output;
    EXPECT_LT(results[r].exit_s - results[2].exit_s, kPromptS);
  }
}

TEST(ProcessEnv, ReadsTorchrunVariablesAndNamesWhatIsMissing) {
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("MASTER_ADDR", "10.0.0.7", 1);
  ::setenv("MASTER_PORT", "29511", 1);
  const ProcessEnv e = process_env_from_environment();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29511);
  ::setenv("RANK", "4", 1);
  EXPECT_THROW(process_env_from_environment(), std::invalid_argument);
  ::unsetenv("MASTER_PORT");
  ::setenv("RANK", "0", 1);
  try {
    process_env_from_environment();
    FAIL();
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("MASTER_PORT"), std::string::npos);
  }
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"}) ::unsetenv(v);
}

}  // namespace
}  // namespace shardgym::live
