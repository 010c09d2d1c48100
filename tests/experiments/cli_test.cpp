// The `shardgym` binary end to end: each subcommand run as a process, exit codes checked
// (0 ok, 2 bad input), output checked for what a user relies on.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>

#include "experiments/calibration_file.h"
#include "experiments/progress.h"
#include "tests/experiments/cli_runner.h"
#include "tests/experiments/json_checker.h"

namespace {

namespace fs = std::filesystem;

using shardgym::testing::CliResult;
using shardgym::testing::JsonChecker;
using shardgym::testing::shardgym_cli;
using shardgym::testing::scratch;
using shardgym::testing::src;

TEST(JsonCheckerTest, AcceptsJsonAndRejectsBrokenText) {
  EXPECT_TRUE(JsonChecker(R"({"a": [1, 2.5e3, -3], "b": {"c": "x\"y"}, "d": null})").valid());
  EXPECT_FALSE(JsonChecker(R"({"a": 1,})").valid());
  EXPECT_FALSE(JsonChecker(R"({"a": 1)").valid());
  EXPECT_FALSE(JsonChecker("{} trailing").valid());
}

TEST(ProgressTest, PlainLinesWithoutATerminal) {
  std::ostringstream out;
  {
    shardgym::Progress p(out, /*tty=*/false);
    p.update("step 1", /*force=*/true);
    p.line("episode 1/1 done");
  }
  EXPECT_EQ(out.str(), "episode 1/1 done\n");
}

TEST(ProgressTest, OneRewrittenLineOnATerminal) {
  std::ostringstream out;
  {
    shardgym::Progress p(out, /*tty=*/true);
    p.update("step 1", /*force=*/true);
    p.update("step 2", /*force=*/true);
    p.line("done");
    p.update("step 3", /*force=*/true);
  }  // the destructor clears the transient line
  EXPECT_EQ(out.str(), "\rstep 1\x1b[K\rstep 2\x1b[K\r\x1b[Kdone\n\rstep 3\x1b[K\r\x1b[K");
}

TEST(CliTest, HelpListsEverySubcommand) {
  CliResult r = shardgym_cli("--help");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* cmd : {"envs", "train", "inspect", "cost", "bench"}) {
    EXPECT_NE(r.output.find(cmd), std::string::npos) << cmd;
  }
  CliResult train = shardgym_cli("train --help");
  EXPECT_EQ(train.code, 0);
  EXPECT_NE(train.output.find("--episodes"), std::string::npos) << train.output;
}

// The simulator against the published runs of experiments/validation/ (the fidelity targets):
// per-GPU throughput within 10 % at the median and 20 % at worst, and every published
// configuration fits memory. A change to the cost model that breaks the fit fails here.
TEST(CliTest, PublishedRunsWithinTheirErrorBounds) {
  CliResult r = shardgym_cli("validate-sim --published '" + src("experiments/validation") +
                             "' --json");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(JsonChecker(r.output).valid()) << r.output;
  std::vector<double> errors;
  const std::string key = "\"error\":";
  for (size_t at = r.output.find(key); at != std::string::npos; at = r.output.find(key, at + 1))
    errors.push_back(std::abs(std::stod(r.output.substr(at + key.size()))));
  ASSERT_GE(errors.size(), 17u) << r.output;
  EXPECT_EQ(r.output.find("\"fits\":false"), std::string::npos) << r.output;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  const double median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  EXPECT_LE(median, 0.10) << r.output;
  EXPECT_LE(errors.back(), 0.20) << r.output;
}

// Configurations of one model are ordered against each other: per model, Kendall's τ of
// predicted against published throughput and the regret of the simulator's pick. Table B's
// four models (full recomputation and selective + SP each) are ordered right; the same two
// 22B configs with their published figures swapped are ordered wrong, and the pick's regret is
// the published 130.0 / 100.7 TF/GPU apart.
TEST(CliTest, PublishedRunsOrderedWithinEachModel) {
  CliResult r = shardgym_cli("validate-sim --published '" + src("experiments/validation") + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("4 models with 2+ configurations: Kendall tau of predicted vs "
                          "published throughput median 1.00, min 1.00; the simulator's pick is "
                          "slower than the published best by median 0.0 %, max 0.0 %"),
            std::string::npos)
      << r.output;
  const fs::path dir = scratch("models");
  fs::create_directories(dir / "runs");
  fs::copy_file(src("experiments/hardware.yaml"), dir / "hardware.yaml");
  auto swapped = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::ifstream in(src("experiments/validation/" + name));
    std::stringstream text;
    text << in.rdbuf();
    std::string y = text.str();
    const size_t at = y.find(from);
    ASSERT_NE(at, std::string::npos) << name;
    y.replace(at, from.size(), to);
    std::ofstream(dir / "runs" / name) << y;
  };
  swapped("korthikanti-a100-22b-full.yaml", "iteration_s: 1.42", "iteration_s: 1.1");
  swapped("korthikanti-a100-22b-selective-sp.yaml", "iteration_s: 1.1", "iteration_s: 1.42");
  CliResult w = shardgym_cli("validate-sim --published '" + (dir / "runs").string() + "' --json");
  fs::remove_all(dir);
  ASSERT_EQ(w.code, 0) << w.output;
  ASSERT_TRUE(JsonChecker(w.output).valid()) << w.output;
  const size_t at = w.output.find("\"models\":[{");
  ASSERT_NE(at, std::string::npos) << w.output;
  EXPECT_NE(w.output.find("\"configs\":2,\"tau\":-1,", at), std::string::npos) << w.output;
  const size_t reg = w.output.find("\"regret\":", at);
  ASSERT_NE(reg, std::string::npos);
  EXPECT_NEAR(std::stod(w.output.substr(reg + 9)), 1.42 / 1.1 - 1, 1e-6) << w.output;
}

// The single-node dev set (docs/published-runs.md table D), one simulated iteration per row:
// every row runs, the errors, the jobs' Kendall tau and the regret of the simulator's pick are
// reported. The bounds are today's, loose: the fit itself is docs/simulator-fidelity.md's.
TEST(CliTest, PublishedTableReportsErrorsRankingAndRegret) {
  CliResult r = shardgym_cli("validate-sim --published '" + src("experiments/validation/vtrain") +
                             "' --json");
  ASSERT_EQ(r.code, 0) << r.output.substr(0, 2000);
  ASSERT_TRUE(JsonChecker(r.output).valid());
  size_t runs = 0, jobs = 0;
  for (size_t at = r.output.find("\"line\":"); at != std::string::npos;
       at = r.output.find("\"line\":", at + 1))
    ++runs;
  const std::string key = "\"regret\":";
  for (size_t at = r.output.find(key); at != std::string::npos; at = r.output.find(key, at + 1)) {
    ++jobs;
    EXPECT_GE(std::stod(r.output.substr(at + key.size())), 1.0);
  }
  EXPECT_EQ(runs, 1440u);
  EXPECT_EQ(jobs, 144u);
  CliResult text = shardgym_cli("validate-sim --published '" +
                                src("experiments/validation/vtrain") + "'");
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.output.find("1440 measured runs"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("Kendall tau"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("too fast on "), std::string::npos) << text.output;
}

// Replay (CompilerGym's validate): a simulator trace re-executed on the simulator with its
// seed drifts by exactly 0; a recorded figure altered afterwards is found, with its step, and
// the command exits 1.
TEST(CliTest, ReplayOfASimTraceDriftsByExactlyZero) {
  const fs::path out = scratch("replay");
  CliResult train = shardgym_cli("train '" + src("tests/experiments/data/replay_events.yaml") +
                                 "' --out '" + out.string() + "'");
  ASSERT_EQ(train.code, 0) << train.output;
  const std::string trace = (out / "trace.h5").string();
  CliResult r = shardgym_cli("replay '" + trace + "' --episode 1 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(JsonChecker(r.output).valid()) << r.output;
  EXPECT_NE(r.output.find("\"within_tolerance\": true"), std::string::npos) << r.output;
  size_t zeros = 0;
  for (size_t at = r.output.find("\"max\": 0,"); at != std::string::npos;
       at = r.output.find("\"max\": 0,", at + 1)) {
    ++zeros;
  }
  EXPECT_EQ(zeros, 8u) << "every figure's largest drift is exactly 0: " << r.output;

  // Alter step 5's recorded latency.
  hid_t file = H5Fopen(trace.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t d = H5Dopen2(file, "/episodes/episode_1/metrics/step_latency_s", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  std::vector<double> lat(14);
  ASSERT_GE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, lat.data()), 0);
  lat[5] *= 1.5;
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, lat.data()), 0);
  H5Dclose(d);
  H5Fclose(file);
  CliResult drifted = shardgym_cli("replay '" + trace + "' --episode 1");
  EXPECT_EQ(drifted.code, 1) << drifted.output;
  EXPECT_NE(drifted.output.find("EXCEEDED"), std::string::npos) << drifted.output;
  EXPECT_NE(drifted.output.find("step_latency_s            0.00e+00      3.33e-01       5"),
            std::string::npos)
      << drifted.output;
  CliResult missing = shardgym_cli("replay '" + trace + "' --episode 7");
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.output.find("no episode_7"), std::string::npos) << missing.output;
  fs::remove_all(out);
}

TEST(CliTest, EnvsListsEachEnvWithFlagsAndOptions) {
  CliResult r = shardgym_cli("envs");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* part :
       {"shardgym/TPSim-v0\n", "shardgym/TPReplay-v0\n", "needs_trace=yes", "deterministic=yes",
        "option", "config key", "steps_per_episode", "reward.normalize", "replay_trace"}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in\n" << r.output;
  }
#if SHARDGYM_TEST_WITH_TORCH
  EXPECT_NE(r.output.find("live.extra.weight_decay"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs_libtorch=yes"), std::string::npos) << r.output;
#endif
  CliResult j = shardgym_cli("envs --json");
  EXPECT_EQ(j.code, 0) << j.output;
  EXPECT_TRUE(JsonChecker(j.output).valid()) << j.output;
  EXPECT_NE(j.output.find("\"id\": \"shardgym/TPReplay-v0\""), std::string::npos) << j.output;
  EXPECT_NE(j.output.find("\"needs_trace\": true"), std::string::npos) << j.output;
  EXPECT_NE(j.output.find("{\"name\": \"steps_per_episode\", \"type\": \"int\", "
                          "\"default\": 100, \"config_key\": \"steps_per_episode\""),
            std::string::npos)
      << j.output;
}

TEST(CliTest, TrainThenInspect) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "quickstart trains ppo, which needs LibTorch";
#endif
  const fs::path out = scratch("test");
  CliResult train = shardgym_cli("train '" + src("experiments/quickstart.yaml") + "' --out '" +
                                 out.string() + "' --episodes 1 --steps 4 --seed 3" +
                                 " --train-steps 1000");
  ASSERT_EQ(train.code, 0) << train.output;
  // The quickstart's agent is PPO: one update of vectorised training (8 envs x 128 steps).
  EXPECT_NE(train.output.find("vectorised training: 1024 env steps"), std::string::npos)
      << train.output;
  EXPECT_TRUE(fs::exists(out / "agent.ckpt")) << train.output;
  EXPECT_NE(train.output.find("Megatron"), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("ratio"), std::string::npos) << train.output;
  // Not a TTY: plain lines, no carriage-return progress.
  EXPECT_EQ(train.output.find('\r'), std::string::npos);
  EXPECT_NE(train.output.find("episode 1/1"), std::string::npos) << train.output;
  const fs::path trace = out / "trace.h5";
  ASSERT_TRUE(fs::exists(trace)) << train.output;
  // learning.csv: a row per update, every env step counted (the greedy evaluation episode of
  // --steps 4 after the update included).
  {
    std::ifstream csv(out / "learning.csv");
    std::string header, row, extra;
    ASSERT_TRUE(std::getline(csv, header)) << train.output;
    EXPECT_EQ(header, "update,training_steps,env_steps,wall_s,eval_return,train_return");
    ASSERT_TRUE(std::getline(csv, row));
    EXPECT_EQ(row.rfind("1,1024,1028,", 0), 0u) << row;
    EXPECT_FALSE(std::getline(csv, extra)) << extra;
  }

  CliResult inspect = shardgym_cli("inspect '" + trace.string() + "'");
  EXPECT_EQ(inspect.code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("shardgym-trace"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("shardgym/TPSim-v0"), std::string::npos) << inspect.output;

  // The trace is readable with h5py from the schema alone (docs/design.md §6).
  const std::string py =
      "/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r'); "
      "e=f['episodes']; print(len(e), e['episode_0']['rewards'].shape[0])\" '" +
      trace.string() + "' 2>&1";
  FILE* pipe = popen(py.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[256] = {0};
  const size_t n = fread(buf, 1, sizeof buf - 1, pipe);
  EXPECT_EQ(pclose(pipe), 0) << std::string(buf, n);
  EXPECT_EQ(std::string(buf, n), "1 4\n");
  fs::remove_all(out);
}

TEST(CliTest, CostJsonIsJson) {
  CliResult r =
      shardgym_cli("cost '" + src("experiments/quickstart.yaml") + "' --plan megatron --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(JsonChecker(r.output).valid()) << r.output;
  CliResult table =
      shardgym_cli("cost '" + src("experiments/quickstart.yaml") + "' --plan 'uniform:tp1d(t=4)'");
  EXPECT_EQ(table.code, 0) << table.output;
}

TEST(CliTest, BenchSimReportsStepsPerSecond) {
  CliResult r = shardgym_cli("bench sim --seconds 0.2 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(JsonChecker(r.output).valid()) << r.output;
  EXPECT_NE(r.output.find("\"steps_per_s\""), std::string::npos);
  EXPECT_NE(r.output.find("\"same_plan\""), std::string::npos);
}

TEST(CliTest, CompareAgainstMegatron) {
  const fs::path traces = scratch("compare");
  CliResult r = shardgym_cli("compare '" + src("experiments/quickstart.yaml") +
                             "' --agents megatron,random --seeds 0,1 --steps 3 --markdown" +
                             " --out '" + traces.string() + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(traces / "megatron.h5")) << r.output;
  EXPECT_TRUE(fs::exists(traces / "random.h5")) << r.output;
  CliResult inspect = shardgym_cli("inspect '" + (traces / "random.h5").string() + "'");
  EXPECT_EQ(inspect.code, 0) << inspect.output;
  // The trace names the binary's commit, as `train`'s does (it once said "compare").
  CliResult version = shardgym_cli("--version");
  const size_t open = version.output.find('('), close = version.output.find(')');
  ASSERT_TRUE(open != std::string::npos && close > open) << version.output;
  EXPECT_NE(inspect.output.find("git sha  " + version.output.substr(open + 1, close - open - 1)),
            std::string::npos)
      << inspect.output << version.output;
  // The same table rebuilt from the recorded traces, running nothing: every agent's row is
  // the same, figure for figure.
  CliResult rebuilt =
      shardgym_cli("compare --from-traces '" + traces.string() + "' --markdown");
  ASSERT_EQ(rebuilt.code, 0) << rebuilt.output;
  for (const std::string agent : {"random", "hindsight-static", "dynamic-oracle"}) {
    const std::string head = "| " + agent + " | 2 |";
    const size_t a = r.output.find(head), b = rebuilt.output.find(head);
    ASSERT_NE(a, std::string::npos) << r.output;
    ASSERT_NE(b, std::string::npos) << rebuilt.output;
    EXPECT_EQ(r.output.substr(a, r.output.find('\n', a) - a),
              rebuilt.output.substr(b, rebuilt.output.find('\n', b) - b));
  }
  EXPECT_NE(rebuilt.output.find("rebuilt from the traces in"), std::string::npos);
  fs::remove_all(traces);
  EXPECT_NE(r.output.find("| agent | runs | throughput ×megatron"), std::string::npos) << r.output;
  // The baseline against itself is exactly 1 in every run.
  EXPECT_NE(r.output.find("| megatron | 2 | 1.00 [1.00, 1.00] |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| random | 2 |"), std::string::npos) << r.output;
  // The reference rows and the scenario's adaptivity headroom come with every comparison.
  EXPECT_NE(r.output.find("| hindsight-static | 2 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| dynamic-oracle | 2 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("adaptivity headroom (dynamic-oracle / hindsight-static"),
            std::string::npos)
      << r.output;
  CliResult bad = shardgym_cli("compare '" + src("experiments/quickstart.yaml") +
                               "' --agents ranodm --steps 2");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("did you mean 'random'"), std::string::npos) << bad.output;
}

// An agent that cannot run on the backend (an oracle on a live run) is reported as not run,
// with the reason, under a table of the others (issue: compare aborted, printing no table).
TEST(CliTest, CompareReportsAgentsThatCannotRunOnTheBackend) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  CliResult r = shardgym_cli("compare '" + src("experiments/live-quickstart.yaml") +
                             "' --agents megatron,oracle --seeds 0 --steps 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("megatron     1     1.00 [1.00, 1.00]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not run: oracle: oracle: the live run cannot estimate()"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("not run: hindsight-static"), std::string::npos) << r.output;
}

TEST(CliTest, EvalComparesAnAgentOrACheckpointWithMegatron) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "it evaluates a ppo checkpoint, which needs LibTorch";
#endif
  const fs::path out = scratch("eval");
  const std::string config = "'" + src("experiments/quickstart.yaml") + "'";
  CliResult atp = shardgym_cli("eval " + config + " --agent atp --seeds 0,1 --steps 5 --out '" +
                               out.string() + "'");
  ASSERT_EQ(atp.code, 0) << atp.output;
  EXPECT_NE(atp.output.find("eval atp on quickstart: 2 seeds"), std::string::npos) << atp.output;
  EXPECT_NE(atp.output.find("mean throughput x megatron: 1."), std::string::npos) << atp.output;
  EXPECT_TRUE(fs::exists(out / "eval.h5"));
  // --predicted-by the same simulator: the prediction is the measurement, seed by seed, so
  // the whole gain is realised, and the interval over the seeds is printed with it.
  CliResult self = shardgym_cli("eval " + config + " --agent atp --seeds 0,1,2 --steps 5 " +
                                "--predicted-by " + config);
  ASSERT_EQ(self.code, 0) << self.output;
  EXPECT_NE(self.output.find("] of the predicted gain"), std::string::npos) << self.output;
  EXPECT_NE(self.output.find("; realised 100 % ["), std::string::npos) << self.output;
  EXPECT_NE(self.output.find("95 % bootstrap interval of the mean over 3 seeds"),
            std::string::npos)
      << self.output;
  CliResult megatron = shardgym_cli("eval " + config + " --agent megatron --seeds 0 --steps 3");
  ASSERT_EQ(megatron.code, 0) << megatron.output;
  EXPECT_NE(megatron.output.find("mean throughput x megatron: 1.000"), std::string::npos)
      << megatron.output;
  // A checkpoint written by train is evaluated as the config's agent (ppo).
  CliResult train = shardgym_cli("train " + config + " --out '" + out.string() +
                                 "' --episodes 1 --steps 2 --train-steps 0");
  ASSERT_EQ(train.code, 0) << train.output;
  CliResult ckpt = shardgym_cli("eval " + config + " --agent 'ckpt:" +
                                (out / "agent.ckpt").string() + "' --seeds 0 --steps 3");
  ASSERT_EQ(ckpt.code, 0) << ckpt.output;
  EXPECT_NE(ckpt.output.find("agent.ckpt"), std::string::npos) << ckpt.output;
  CliResult missing = shardgym_cli("eval " + config + " --agent ckpt:/nonexistent.ckpt");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
  fs::remove_all(out);
}

TEST(CliTest, BenchLearnReportsTheOracleAndACurve) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "bench learn trains ppo, which needs LibTorch";
#endif
  CliResult r = shardgym_cli("bench learn '" + src("experiments/quickstart.yaml") +
                             "' --envs 2 --max-steps 256 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string json = r.output.substr(r.output.find('{'));
  EXPECT_TRUE(JsonChecker(json).valid()) << json;
  EXPECT_NE(json.find("\"oracle_return\""), std::string::npos);
  EXPECT_NE(json.find("\"update\": 1"), std::string::npos) << json;
  CliResult bad = shardgym_cli("bench learn '" + src("experiments/quickstart.yaml") +
                               "' --agent megatron --max-steps 10");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("does not learn"), std::string::npos) << bad.output;
}

// calibrate on the live run, end to end: every uniform plan `--passes` times, then the mixed
// plans; the table holds every catalog strategy of both block kinds, and the file reads back.
TEST(CliTest, CalibrateMeasuresTheUniformPlansInPasses) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  const fs::path dir = scratch("calibrate");
  fs::create_directories(dir);
  const std::string out = (dir / "calib.yaml").string();
  CliResult r = shardgym_cli("calibrate '" + src("experiments/fidelity/live-threads-2.yaml") +
                             "' --out '" + out + "' --warmup 1 --iterations 1 --passes 2 "
                             "--mixed-plans 2 --allow-noisy");
  ASSERT_EQ(r.code, 0) << r.output;
  const shardgym::CalibrationFile c = shardgym::load_calibration_file(out);
  EXPECT_EQ(c.passes, 2);
  // Progress names the plans: the uniform ones twice, the mixed ones once.
  ASSERT_GT(c.plans, 2);
  ASSERT_EQ((c.plans - 2) % 2, 0) << c.plans;
  const size_t uniform = static_cast<size_t>((c.plans - 2) / 2);
  EXPECT_NE(r.output.find("[" + std::to_string(c.plans) + "/" + std::to_string(c.plans) + "]"),
            std::string::npos)
      << r.output;
  const std::string first = "uniform:dp: step";
  size_t seen = 0;
  for (size_t at = r.output.find(first); at != std::string::npos;
       at = r.output.find(first, at + 1))
    ++seen;
  EXPECT_EQ(seen, 2u) << r.output;
  // Both block kinds of every strategy measured, each with a positive time.
  EXPECT_EQ(c.runtime.blocks.size(), 2 * uniform);
  for (const auto& b : c.runtime.blocks)
    EXPECT_GT(b.fwd_s + b.bwd_s + b.comm_s, 0) << b.strategy;
  // The drift reference's median is recorded, and validate-sim --drift-reference with this
  // file measures the reference again and gives the step errors at the calibration's speed
  // too (not without the flag).
  EXPECT_EQ(c.drift_reference, "uniform:dp");
  EXPECT_GT(c.drift_reference_s, 0);
  // The pipeline pass: 2 ranks form one pipeline, 2 stages of a rank, at m = 1, 2, 4 under
  // 1F1B and GPipe (the batch of 8 splits into each); each row's bubble is the share of the
  // schedule the slowest stage does not compute, and the command prints them against the
  // simulator it just calibrated.
  ASSERT_EQ(c.pipelines.size(), 6u) << r.output;
  EXPECT_EQ(c.pipelines[0].plan, "uniform:dp@pp(p=2,m=1)");
  EXPECT_EQ(c.pipelines[5].plan, "uniform:dp@pp(p=2,m=4,schedule=gpipe)");
  for (size_t i = 0; i < c.pipelines.size(); ++i) {
    const auto& t = c.pipelines[i];
    const int m = i % 3 == 0 ? 1 : i % 3 == 1 ? 2 : 4;
    EXPECT_GT(t.stage_compute_s, 0) << t.plan;
    EXPECT_GT(t.bubble, 0) << t.plan;  // p = 2 stages: at least 1/5 at m = 4
    EXPECT_NEAR(t.bubble, 1 - m * t.stage_compute_s / (t.step_s - t.optimizer_s), 1e-12) << t.plan;
  }
  EXPECT_NE(r.output.find("pipeline pass [6/6] uniform:dp@pp(p=2,m=4,schedule=gpipe): step"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the schedule's fill and drain"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("median error by micro-batch count, step: m=1 "), std::string::npos)
      << r.output;
  // Then the boundary walk (2/2 → 3/1 → 1/3 → 2/2 → 1/3 → 3/1 → 2/2 on the 4 layers), whose
  // moves the repartition fit takes in beside the random plans' changes.
  EXPECT_NE(r.output.find("pipeline pass: 6 boundary moves of uniform:dp@pp(p=2,m=1)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("repartition fit with 6 boundary moves: median error"), std::string::npos)
      << r.output;
  const std::string validate = "validate-sim '" + src("experiments/fidelity/live-threads-2.yaml") +
                               "' --calibration '" + out +
                               "' --plans 3 --warmup 1 --iterations 1 --no-repeat --allow-noisy";
  CliResult v = shardgym_cli(validate + " --drift-reference");
  ASSERT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("machine speed against the calibration: uniform:dp took "),
            std::string::npos) << v.output;
  EXPECT_NE(v.output.find("step (speed)"), std::string::npos) << v.output;
  CliResult plain = shardgym_cli(validate);
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("machine speed"), std::string::npos) << plain.output;
  fs::remove_all(dir);
}

// A rank that fails ends its episode; the trace is written and train exits 1 naming the error
// (it used to exit 0 with "ended by a failed step"). Likewise a rank that stalls (named, not
// its peers that timed out) and a rank thread that cannot start (it used to abort, exit 134).
TEST(CliTest, TrainExitsOneWhenARankFails) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "the live runtime needs LibTorch";
#endif
  const fs::path dir = scratch("fault");
  fs::create_directories(dir);
  std::ifstream in(src("experiments/live-quickstart.yaml"));
  std::stringstream text;
  text << in.rdbuf();
  struct Case {
    std::string fault, cause;
    bool trace;  // the episode started, so its trace is written
  };
  for (const Case& c : {Case{"throw@1:1", "rank 1 failed: step (command 3): injected fault", true},
                        Case{"stall@1:1", "rank 1 stalled: no answer to step (command 3)", true},
                        Case{"nostart@1", "rank 1 failed: cannot start rank thread 1 of 4", false}}) {
    std::string cfg = text.str();
    const std::string anchor = "    clip: \"1.0\"\n";
    ASSERT_NE(cfg.find(anchor), std::string::npos);
    cfg.replace(cfg.find(anchor), anchor.size(), anchor + "    fault: \"" + c.fault + "\"\n");
    cfg.replace(cfg.find("agent:\n  id: random"), 20, "agent:\n  id: dp    ");
    cfg.replace(cfg.find("timeout_s: 60"), 13, "timeout_s: 2 ");
    {
      std::ofstream out(dir / "fault.yaml");
      out << cfg;
    }
    fs::remove_all(dir / "run");
    CliResult r = shardgym_cli("train '" + (dir / "fault.yaml").string() + "' --out '" +
                               (dir / "run").string() + "' --steps 4");
    EXPECT_EQ(r.code, 1) << c.fault << ": " << r.output;
    EXPECT_NE(r.output.find(c.cause), std::string::npos) << c.fault << ": " << r.output;
    if (c.trace) {
      EXPECT_NE(r.output.find("shardgym train: episode 1 ended by an error at step"),
                std::string::npos)
          << r.output;
      EXPECT_TRUE(fs::exists(dir / "run" / "trace.h5")) << r.output;
    }
  }
  fs::remove_all(dir);
}

TEST(CliTest, BadConfigExitsTwoNamingTheKey) {
  CliResult r = shardgym_cli("train '" + src("tests/experiments/data/unknown_key.yaml") +
                             "' --out /nonexistent");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("shardgym: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unknown_key.yaml:3: model.hiden: unknown key"), std::string::npos)
      << r.output;
}

TEST(CliTest, InitialPlanThatDoesNotFitExitsTwo) {
  const fs::path out = scratch("oom");
  CliResult r = shardgym_cli("train '" + src("tests/experiments/data/initial_plan_oom.yaml") +
                             "' --out '" + out.string() + "' --steps 2");
  fs::remove_all(out);
  EXPECT_EQ(r.code, 2) << r.output;
  // With a line, like every load-time error: the model's, as the plan is the default one.
  EXPECT_NE(r.output.find("initial_plan_oom.yaml:2: initial_plan: plan 'uniform:tp1d(t=8)' "
                          "(the default initial plan, megatron) does not fit device memory"),
            std::string::npos)
      << r.output;
}

TEST(CliTest, BadPlanExitsTwo) {
  CliResult r =
      shardgym_cli("cost '" + src("experiments/quickstart.yaml") + "' --plan 'uniform:tp1d(t=3)'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--plan"), std::string::npos) << r.output;
}

TEST(CliTest, BadCommandLineExitsTwo) {
  // One case per kind of CLI11 error (each process start loads LibTorch: ~1 s).
  EXPECT_EQ(shardgym_cli("no-such-command").code, 2);
  EXPECT_EQ(shardgym_cli("train /no/such/file.yaml").code, 2);
  EXPECT_EQ(shardgym_cli("train '" + src("experiments/quickstart.yaml") + "' --episodes 0").code,
            2);
}

}  // namespace
