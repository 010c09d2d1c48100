// `shardgym validate-sim` against the live run, end to end (the binary run as a process, as
// cli_test.cpp runs the other subcommands): random plans, pipelined plans, data shares, traces
// and the noise check. --published is in cli_test.cpp.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hdf5.h>

#include "tests/experiments/cli_runner.h"
#include "tests/experiments/json_checker.h"

namespace {

namespace fs = std::filesystem;

using shardgym::testing::CliResult;
using shardgym::testing::JsonChecker;
using shardgym::testing::shardgym_cli;
using shardgym::testing::scratch;
using shardgym::testing::src;

// The JSON line of a validate-sim --json run (a noise warning may follow it on stderr, which
// the runner reads too).
std::string json_line(const std::string& output) {
  const size_t at = output.find("{\"config\"");
  if (at == std::string::npos) return "";
  const std::string json = output.substr(at);
  return json.substr(0, json.find('\n'));
}

// validate-sim on a live config with data-share groups: the plans' shares walk one share
// choice at a time with the blocks (each plan one env step from the last on both runs), and
// the repartitions' bytes and memory in transit agree exactly.
TEST(CliValidateTest, ValidateSimWalksTheDataShares) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  // Seed 2 walks through a group leaving (w=12/0), the other group taking its place
  // (w=0/12: all of its state received) and both training again. The walk ends with a group
  // left out and begins with blocks that span both: the repeat pass goes back to its first
  // plan through the shares first (it stopped on a masked action before).
  CliResult r = shardgym_cli("validate-sim '" + src("experiments/live-shares.yaml") +
                             "' --plans 8 --warmup 1 --iterations 1 --allow-noisy "
                             "--json --seed 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string json = json_line(r.output);
  EXPECT_TRUE(JsonChecker(json).valid()) << json;
  size_t uneven = 0;
  for (size_t at = json.find("@dp(w="); at != std::string::npos; at = json.find("@dp(w=", at + 1))
    ++uneven;
  EXPECT_GE(uneven, 2u) << json;
  EXPECT_NE(json.find("@dp(w=0/12)"), std::string::npos) << "no group rejoined: " << json;
  EXPECT_NE(json.find("@dp(w=12/0)"), std::string::npos) << "no group left: " << json;
  for (const char* exact : {"\"repartition_bytes\": {\"median\": 0, \"p90\": 0, \"n\": ",
                            "\"repartition_peak_bytes\": {\"median\": 0, \"p90\": 0, \"n\": "})
    EXPECT_NE(json.find(exact), std::string::npos) << exact << " in " << json;
  EXPECT_NE(json.find("\"live_repeat_step\": {"), std::string::npos) << json;
  EXPECT_NE(json.find("\"n\": 8}, \"live_repeat_tau\""), std::string::npos)
      << "every plan visited again: " << json;
}

// validate-sim against the live run: the repartition bytes and the memory in transit are the
// simulator's to the byte, and --traces records both runs with the same plans step for step.
TEST(CliValidateTest, ValidateSimOnTheLiveRunWritesBothTraces) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  const fs::path dir = scratch("validate");
  fs::create_directories(dir);
  const std::string prefix = (dir / "v").string();
  CliResult r = shardgym_cli(
      "validate-sim '" + src("experiments/fidelity/live-threads-2.yaml") +
      "' --plans 4 --warmup 1 --iterations 2 --no-repeat --allow-noisy --json --traces '" + prefix +
      "'");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string json = json_line(r.output);
  EXPECT_TRUE(JsonChecker(json).valid()) << json;
  EXPECT_NE(json.find("\"noise\": {\"level\": "), std::string::npos) << json;
  // No pipelined plan, nothing to group by micro-batch count.
  EXPECT_NE(json.find("\"step_by_micro_batches\": [], "), std::string::npos) << json;
  for (const char* exact : {"\"repartition_bytes\": {\"median\": 0, \"p90\": 0, \"n\": ",
                            "\"repartition_peak_bytes\": {\"median\": 0, \"p90\": 0, \"n\": "})
    EXPECT_NE(json.find(exact), std::string::npos) << exact << " in " << json;
  std::vector<std::vector<int32_t>> plans;
  for (const char* side : {".live.h5", ".sim.h5"}) {
    const std::string path = prefix + side;
    ASSERT_TRUE(fs::exists(path)) << path;
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0) << path;
    hid_t d = H5Dopen2(f, "/episodes/episode_0/plans", H5P_DEFAULT);
    ASSERT_GE(d, 0) << path;
    std::vector<int32_t> ids(4 * 3 * 8);  // 4 plans × (1 warm-up + 2 measured) × 8 blocks
    hid_t space = H5Dget_space(d);
    EXPECT_EQ(H5Sget_simple_extent_npoints(space), static_cast<hssize_t>(ids.size())) << path;
    H5Sclose(space);
    EXPECT_GE(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()), 0);
    H5Dclose(d);
    H5Fclose(f);
    plans.push_back(ids);
    const CliResult inspect = shardgym_cli("inspect '" + path + "'");
    EXPECT_NE(inspect.output.find(std::string(side) == ".live.h5" ? "live" : "sim"),
              std::string::npos)
        << inspect.output;
  }
  EXPECT_EQ(plans[0], plans[1]);
  fs::remove_all(dir);
}

// The noise check of live figures (experiments/noise_gate.h): validate-sim judges the live
// run's second visit of every plan. A limit no real machine meets (0.1 %) makes the figures
// refused with exit status 3, still printed, the reason on stderr; --allow-noisy keeps them
// (exit 0) with the warning; JSON carries the verdict.
TEST(CliValidateTest, ValidateSimRefusesFiguresFromATooNoisyMachine) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  const std::string validate = "validate-sim '" + src("experiments/fidelity/live-threads-2.yaml") +
                               "' --plans 3 --warmup 1 --iterations 2 --noise-limit 0.001";
  CliResult refused = shardgym_cli(validate);
  EXPECT_EQ(refused.code, 3) << refused.output;
  EXPECT_NE(refused.output.find("live noise: too noisy; agreement with itself (step latency, "
                                "second visit of every plan, 3 pairs)"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("the machine is too noisy for these figures: the live run "
                                "disagrees with itself by a median"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("Kendall"), std::string::npos) << "the figures are still shown";
  CliResult kept = shardgym_cli(validate + " --allow-noisy --json");
  EXPECT_EQ(kept.code, 0) << kept.output;
  EXPECT_NE(kept.output.find("\"noise\": {\"level\": \"too noisy\""), std::string::npos)
      << kept.output;
  EXPECT_NE(kept.output.find("\"refused\": false"), std::string::npos) << kept.output;
  EXPECT_NE(kept.output.find("Kept because of --allow-noisy."), std::string::npos) << kept.output;
  // Not a live config: the options are refused, not ignored.
  CliResult sim = shardgym_cli("eval " + src("experiments/quickstart.yaml") +
                               " --agent megatron --seeds 0 --steps 2 --allow-noisy");
  EXPECT_EQ(sim.code, 2) << sim.output;
  EXPECT_NE(sim.output.find("--allow-noisy and --noise-limit are for live configs"),
            std::string::npos)
      << sim.output;
}

// --pipelines: random pipelined plans on the live ranks and the simulator; every drawn plan
// has p >= 2 stages (2 ranks: 2 stages of a rank), the repartitions' bytes agree exactly, and
// the step's signed error is also given by micro-batch count (the trend docs/live-fidelity.md
// follows), in the table and in the JSON, one group per m drawn, the counts adding up.
TEST(CliValidateTest, ValidateSimPipelinesGroupsTheStepErrorByMicroBatches) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  const std::string validate = "validate-sim '" + src("experiments/fidelity/live-threads-2.yaml") +
                               "' --pipelines --plans 4 --warmup 1 --iterations 1 --no-repeat "
                               "--allow-noisy --seed 3";
  CliResult text = shardgym_cli(validate);
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("step by micro-batch count (median of sim / live − 1, signed; "
                             "plans): m="),
            std::string::npos)
      << text.output;
  CliResult r = shardgym_cli(validate + " --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string json = json_line(r.output);
  EXPECT_TRUE(JsonChecker(json).valid()) << json;
  size_t plans = 0;
  for (size_t at = json.find("\"plan\": \""); at != std::string::npos;
       at = json.find("\"plan\": \"", at + 1), ++plans) {
    const std::string plan = json.substr(at, json.find('"', at + 9) - at);
    EXPECT_NE(plan.find("@pp(p=2"), std::string::npos) << plan;
  }
  EXPECT_EQ(plans, 4u) << json;
  const size_t groups = json.find("\"step_by_micro_batches\": [{\"micro_batches\": ");
  ASSERT_NE(groups, std::string::npos) << json;
  int counted = 0;
  const size_t groups_end = json.find(']', groups);
  for (size_t at = json.find("\"n\": ", groups); at < groups_end; at = json.find("\"n\": ", at + 1))
    counted += std::stoi(json.substr(at + 5));
  EXPECT_EQ(counted, 4) << json;
  EXPECT_NE(json.find("\"repartition_bytes\": {\"median\": 0, \"p90\": 0, \"n\": "),
            std::string::npos)
      << json;
}

}  // namespace
