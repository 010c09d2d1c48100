// The `shardgym` binary under the failures of docs/robustness.md: an accepted config at the
// largest world the limits allow is priced in seconds; `train` killed while it records keeps
// the trained policy in a checkpoint that loads; `train --out` does not write through
// symbolic links.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <vector>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <type_traits>

#include <gtest/gtest.h>
#include <hdf5.h>

#include "tests/experiments/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using shardgym::testing::CliResult;
using shardgym::testing::shardgym_cli;
using shardgym::testing::scratch;
using shardgym::testing::src;

// 16,777,216 ranks on 4,096 nodes: ClusterSpec::kMaxGpus and kMaxNodes. Pricing it used to
// take days (a loop over every pair of a group's ranks) and then minutes (a linear scan of
// the nodes for every rank). 60 s is generous: on a 2-core machine shared with a compile it
// takes 10 to 20 s, most of it building the per-rank tables once.
TEST(CliRobustness, CostAtTheLargestWorldFinishesInSeconds) {
  const auto start = Clock::now();
  CliResult r = shardgym_cli("cost '" + src("tests/experiments/data/world_limit.yaml") +
                             "' --plan megatron");
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("dp p=524288"), std::string::npos) << r.output;
#if defined(__SANITIZE_ADDRESS__)
  const double bound = 300.0;  // AddressSanitizer's build: about 5x slower (92 s measured)
#else
  const double bound = 60.0;
#endif
  EXPECT_LT(s, bound) << "cost at 16,777,216 ranks took " << s << " s";
  std::printf("[   INFO   ] cost at 16,777,216 ranks: %.1f s\n", s);
}

#if SHARDGYM_TEST_WITH_TORCH
// The trained policy is written as soon as training picks it: a kill while the episodes are
// recorded leaves agent.ckpt, and it loads (eval --agent ckpt:). Before, the policy lived only
// in memory (and agent.best.ckpt, removed after training) until the last episode ended.
TEST(CliRobustness, TrainKilledWhileRecordingKeepsTheTrainedPolicy) {
  const fs::path out = scratch("robust_kill");
  const fs::path ckpt = out / "agent.ckpt", trace = out / "trace.h5";
  const std::string config = src("experiments/tiny.yaml");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    // Many long episodes: recording outlasts the test's patience by far.
    execl(SHARDGYM_CLI_PATH, SHARDGYM_CLI_PATH, "train", config.c_str(), "--out",
          out.c_str(), "--train-steps", "256", "--episodes", "100000", "--steps", "50",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for recording to begin: the trace has its first episode group once training ended.
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  bool recording = false;
  while (Clock::now() < deadline) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;  // ended early: a failure below
    if (fs::exists(ckpt) && fs::exists(trace) && fs::file_size(trace) > 64 * 1024) {
      recording = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const bool alive = kill(pid, 0) == 0;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(alive) << "train ended before it was killed";
  ASSERT_TRUE(recording) << "no agent.ckpt while the episodes were recorded (after 120 s)";
  CliResult eval = shardgym_cli("eval '" + config + "' --agent 'ckpt:" + ckpt.string() +
                                "' --seeds 0 --steps 3");
  EXPECT_EQ(eval.code, 0) << eval.output;
  fs::remove_all(out);
}
#endif

// `train --out` given a symbolic link, or a folder whose trace.h5 is a link, writes nothing
// through it; agent.ckpt as a link is replaced (rename), its target untouched.
TEST(CliRobustness, TrainDoesNotWriteThroughSymlinks) {
  const fs::path base = scratch("robust_symlink");
  fs::create_directories(base / "real");
  const fs::path victim = base / "victim.txt";
  { std::ofstream(victim) << "precious\n"; }
  fs::create_directory_symlink(base / "real", base / "link");
  const std::string config = "'" + src("experiments/tiny.yaml") + "'";
  CliResult linked = shardgym_cli("train " + config + " --out '" + (base / "link").string() + "'" +
                                   " --episodes 1 --steps 2 --train-steps 0");
  EXPECT_NE(linked.code, 0) << linked.output;
  EXPECT_NE(linked.output.find("symbolic link"), std::string::npos) << linked.output;
  EXPECT_TRUE(fs::is_empty(base / "real"));
  fs::create_symlink(victim, base / "real" / "trace.h5");
  CliResult trace = shardgym_cli("train " + config + " --out '" + (base / "real").string() + "'" +
                                 " --episodes 1 --steps 2 --train-steps 0");
  EXPECT_NE(trace.code, 0) << trace.output;
  std::ifstream in(victim);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "precious");
  fs::remove_all(base);
}

// Sets element `at` of the dataset `name` of the trace at `path` to `value`, in place.
template <typename T>
void set_trace_element(const std::string& path, const char* name, size_t at, T value) {
  const hid_t type = std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT32;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  ASSERT_GE(d, 0) << name;
  hid_t space = H5Dget_space(d);
  std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  H5Sclose(space);
  ASSERT_LT(at, v.size());
  ASSERT_GE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  v[at] = value;
  ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Dclose(d);
  H5Fclose(f);
}

// Traces in `dir` of 3 steps of seed 0 on the quickstart, by `compare` with `options`.
void compare_quickstart(const fs::path& dir, const std::string& options) {
  CliResult r = shardgym_cli("compare '" + src("experiments/quickstart.yaml") + "' " + options +
                             " --seeds 0 --steps 3 --out '" + dir.string() + "'");
  ASSERT_EQ(r.code, 0) << r.output;
}

// `compare --from-traces` refuses a zero or NaN latency of a step that did not fail, naming the
// trace (it used to turn it into a throughput ratio).
TEST(CliRobustness, CompareFromTracesRefusesImpossibleFigures) {
  const fs::path dir = scratch("robust_compare");
  ASSERT_NO_FATAL_FAILURE(compare_quickstart(dir, "--agents megatron,random"));
  const std::string trace = (dir / "random.h5").string();
  for (double v : {0.0, std::nan(""), -1.0}) {
    set_trace_element(trace, "/episodes/episode_0/metrics/step_latency_s", 1, v);
    CliResult rebuilt = shardgym_cli("compare --from-traces '" + dir.string() + "'");
    EXPECT_NE(rebuilt.code, 0) << rebuilt.output;
    EXPECT_NE(rebuilt.output.find("random.h5"), std::string::npos) << rebuilt.output;
    EXPECT_NE(rebuilt.output.find("step_latency_s"), std::string::npos) << rebuilt.output;
  }
  fs::remove_all(dir);
}

// A trace whose plan ids fall outside its strategy table, or whose observations are wider than
// the env its own config builds, used to pass `inspect` (and `replay`, for the width): both
// now refuse it, naming the trace and what does not match.
TEST(CliRobustness, InspectAndReplayRefuseWidthsAndPlanIdsTheirConfigDoesNotMake) {
  const fs::path dir = scratch("robust_widths");
  ASSERT_NO_FATAL_FAILURE(compare_quickstart(dir, "--agents megatron --no-references"));
  const fs::path good = dir / "megatron.h5";
  CliResult ok = shardgym_cli("inspect '" + good.string() + "'");
  ASSERT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("widths   match the env its config builds"), std::string::npos)
      << ok.output;

  const fs::path bad_plan = dir / "bad_plan.h5";
  fs::copy_file(good, bad_plan);
  set_trace_element(bad_plan.string(), "/episodes/episode_0/plans", 1, int32_t{999});
  CliResult plan = shardgym_cli("inspect '" + bad_plan.string() + "'");
  EXPECT_EQ(plan.code, 1) << plan.output;
  EXPECT_NE(plan.output.find("episode_0 step 0 block 1 has plan id 999, outside the trace's"),
            std::string::npos)
      << plan.output;

  const fs::path wide = dir / "wide_obs.h5";
  fs::copy_file(good, wide);
  hsize_t dims[2] = {0, 0};
  {
    hid_t f = H5Fopen(wide.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t d = H5Dopen2(f, "/episodes/episode_0/observations", H5P_DEFAULT);
    ASSERT_GE(d, 0);
    hid_t space = H5Dget_space(d);
    ASSERT_EQ(H5Sget_simple_extent_dims(space, dims, nullptr), 2);
    H5Sclose(space);
    H5Dclose(d);
    ASSERT_GE(H5Ldelete(f, "/episodes/episode_0/observations", H5P_DEFAULT), 0);
    hsize_t wider[2] = {dims[0], dims[1] + 1};
    hid_t s2 = H5Screate_simple(2, wider, nullptr);
    hid_t d2 = H5Dcreate2(f, "/episodes/episode_0/observations", H5T_NATIVE_FLOAT, s2,
                          H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d2, 0);
    std::vector<float> zeros(static_cast<size_t>(wider[0] * wider[1]), 0.0f);
    ASSERT_GE(H5Dwrite(d2, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()), 0);
    H5Dclose(d2);
    H5Sclose(s2);
    H5Fclose(f);
  }
  const std::string want = "observation width " + std::to_string(dims[1] + 1) + " recorded, " +
                           std::to_string(dims[1]) + " in the env built from its config";
  for (const char* cmd : {"inspect", "replay"}) {
    CliResult w = shardgym_cli(std::string(cmd) + " '" + wide.string() + "'");
    EXPECT_EQ(w.code, 1) << cmd << ": " << w.output;
    EXPECT_NE(w.output.find(want), std::string::npos) << cmd << ": " << w.output;
  }
  fs::remove_all(dir);
}

}  // namespace
