// Task suites (experiments/suite.h): a suite file is checked before anything runs (training
// and test instances never overlap), learners train on training instances only, and the
// table's figures come from the episodes they summarise.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "experiments/config.h"
#include "experiments/suite.h"
#include "tests/experiments/shipped_configs.h"

namespace shardgym {
namespace {
namespace fs = std::filesystem;

class SuiteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("shardgym-suite-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // A 2-layer GPT on 2 x 4 GPUs with a straggler drawn per instance (20-step episodes). The
    // inter-node link is fast enough that both nodes train (with a slow one, the best plan
    // leaves a node out, and a straggler there costs nothing: no headroom to test).
    write("task.yaml",
          "name: tiny-stragglers\n"
          "model: {layers: 2, hidden: 2048, heads: 16, seq: 1024, micro_batch: 1, "
          "global_batch: 16}\n"
          "cluster:\n"
          "  devices: [{name: d, peak_tflops: {bf16: 300}, memory_gib: 80, memory_bw_gbs: 2000,\n"
          "             idle_w: 50, busy_w: 400}]\n"
          "  links: [{name: nv, bandwidth_gbs: 300, latency_us: 3},\n"
          "          {name: ib, bandwidth_gbs: 200, latency_us: 5}]\n"
          "  nodes: [{device: d, gpus: 4, intra_link: nv, count: 2}]\n"
          "  inter_link: ib\n"
          "scenario:\n"
          "  noise: 0.0\n"
          "  draw: [{kind: straggler, count: 1, start: [3, 8], duration: 8, factor: 2.0}]\n"
          "data_shares: {groups: 2}\n"
          "steps_per_episode: 20\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string suite(const std::string& extra) {
    return write("suite.yaml", "name: t\ntasks: [task.yaml]\n" + extra);
  }
  void expect_error(const std::string& extra, const std::string& key) {
    try {
      load_suite(suite(extra));
      ADD_FAILURE() << "accepted: " << extra;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_GT(e.line(), 0);
    }
  }
  fs::path dir_;
};

TEST(ShippedSuites, LoadWithEveryTaskDrawingItsEvents) {
  const std::vector<std::string> suites = testing::shipped_suites();
  ASSERT_FALSE(suites.empty());
  for (const std::string& path : suites) {
    SCOPED_TRACE(path);
    const SuiteSpec s = load_suite(path);  // throws on overlapping instances
    EXPECT_GE(s.tasks.size(), 6u);
    for (const ExperimentSpec& t : s.tasks) EXPECT_FALSE(t.scenario.draws.empty()) << t.name;
  }
}

TEST_F(SuiteTest, TrainingAndTestInstancesNeverOverlap) {
  expect_error("train_instances: {first: 0, count: 10}\ntest_instances: [12, 9]\n",
               "test_instances");
  expect_error("train_instances: [1, 2, 1]\ntest_instances: [5]\n", "train_instances");
  expect_error("train_instances: [1]\ntest_instances: {first: 0, count: 0}\n",
               "test_instances.count");
  const SuiteSpec s = load_suite(suite("train_instances: {first: 100, count: 3}\n"
                                       "test_instances: {first: 0, count: 2}\n"));
  EXPECT_EQ(s.train_instances, (std::vector<uint64_t>{100, 101, 102}));
  EXPECT_EQ(s.test_instances, (std::vector<uint64_t>{0, 1}));
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_EQ(s.tasks[0].name, "tiny-stragglers");
}

TEST_F(SuiteTest, BadSuitesAreRefusedAtTheirKey) {
  expect_error("train_instances: [1]\ntest_instances: [2]\nagents: [nope]\n", "agents[0]");
  expect_error("train_instances: [1]\ntest_instances: [2]\nepisodes: 3\n", "episodes");
  write("live.yaml", "env: shardgym/TPLive-v0\nmodel: {layers: 2, hidden: 64, heads: 4, seq: 32,"
                     " micro_batch: 1, global_batch: 2}\n");
  try {
    load_suite(write("suite2.yaml", "tasks: [missing.yaml]\ntrain_instances: [1]\n"
                                    "test_instances: [2]\n"));
    ADD_FAILURE() << "a missing task was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "tasks[0]") << e.what();
  }
}

TEST_F(SuiteTest, LearnersTrainOnTrainingInstancesOnlyAndTheTableSummarisesTheEpisodes) {
  SuiteSpec s = load_suite(suite("train_instances: {first: 100, count: 5}\n"
                                 "test_instances: [0, 1, 2]\n"
                                 "training_seeds: 2\ntrain_steps: 256\ntrain_envs: 2\n"));
  // PPO needs LibTorch: without it (the sanitizer build) the learner's part is not run.
  const bool torch = SHARDGYM_TEST_WITH_TORCH;
  std::vector<std::string> agents = {"replan"};
  if (torch) agents.push_back("ppo(polish=0)");
  const SuiteResult r = run_suite(s, agents, {});
  ASSERT_EQ(r.tasks.size(), 1u);
  const SuiteTask& t = r.tasks[0];
  // References first, then the agents; the learner once per training seed.
  std::vector<std::string> order;
  for (const SuiteRun& run : t.runs) order.push_back(run.agent);
  std::vector<std::string> want = {"megatron", "hindsight-static", "dynamic-oracle", "replan"};
  if (torch) want.insert(want.end(), {"ppo(polish=0)", "ppo(polish=0)"});
  EXPECT_EQ(order, want);
  const std::set<uint64_t> test(s.test_instances.begin(), s.test_instances.end());
  for (const SuiteRun& run : t.runs) {
    ASSERT_EQ(run.episodes.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(run.episodes[i].instance, s.test_instances[i]);
    if (run.training_seed < 0) continue;
    // Rollouts (at least 256) and the greedy episodes that pick the policy kept all count.
    EXPECT_GT(run.train_env_steps, 256);
    ASSERT_FALSE(run.trained_on.empty());
    for (uint64_t i : run.trained_on) EXPECT_EQ(test.count(i), 0u) << "trained on test instance " << i;
    // 2 envs × 128 steps of 20-step episodes: each env cycles through its half of the
    // training instances (100, 102 and 101, 103), not only its first; 104, kept apart, picks
    // the policy.
    EXPECT_EQ(run.trained_on, (std::vector<uint64_t>{100, 101, 102, 103, 104}));
  }
  // The rows are the episodes' geometric means.
  const SuiteRun& meg = t.runs[0];
  const SuiteRun& hs = t.runs[1];
  const SuiteRun& dyn = t.runs[2];
  double log_dyn = 0, log_hs = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(meg.episodes[i].throughput, 0);
    // The dynamic oracle can always keep hindsight-static's plan (no noise here).
    EXPECT_GE(dyn.episodes[i].throughput, hs.episodes[i].throughput * (1 - 1e-6));
    log_dyn += std::log(dyn.episodes[i].throughput / meg.episodes[i].throughput) / 3;
    log_hs += std::log(hs.episodes[i].throughput / meg.episodes[i].throughput) / 3;
  }
  const std::vector<SuiteRow> rows = suite_rows(r);
  ASSERT_EQ(rows.size(), torch ? 5u : 4u);  // one per agent: the learner's seeds are pooled
  EXPECT_EQ(rows[1].agent, "hindsight-static");
  EXPECT_NEAR(rows[1].vs_megatron.point, std::exp(log_hs), 1e-9);
  EXPECT_NEAR(rows[2].vs_megatron.point, std::exp(log_dyn), 1e-9);
  EXPECT_NEAR(rows[2].gain_share, 1.0, 1e-9);
  EXPECT_NEAR(rows[2].headroom, std::exp(log_dyn - log_hs), 1e-9);
  // A straggler half as fast for 8 of 20 steps: re-sharing while it lasts wins something.
  EXPECT_GT(rows[2].headroom, 1.01);
  if (torch) {
    EXPECT_EQ(rows[4].runs, 2);
    EXPECT_EQ(rows[4].vs_megatron.n, 6);  // 2 seeds x 3 instances
  }
  // Text, markdown and JSON carry the same rows.
  const std::string text = format_suite(r, TableFormat::kText);
  EXPECT_NE(text.find("tiny-stragglers"), std::string::npos);
  EXPECT_NE(text.find("overall"), std::string::npos);
  const std::string json = suite_to_json(r);
  if (torch) {
    EXPECT_NE(json.find("\"agent\": \"ppo(polish=0)\", \"training_seed\": 1, \"instance\": 2"),
              std::string::npos);
  }
  // `suite --from-json` prints the same tables from the JSON alone.
  const SuiteResult back = suite_from_json({write("r.json", json)});
  EXPECT_EQ(format_suite(back, TableFormat::kMarkdown), format_suite(r, TableFormat::kMarkdown));
  // A JSON whose episodes no longer pair with the test instances is refused.
  std::string broken = json;
  broken.replace(broken.rfind("\"instance\": 2"), 13, "\"instance\": 7");
  EXPECT_THROW(suite_from_json({write("broken.json", broken)}), ConfigError);
  if (!torch) return;
  // A learner's runs made without references merge with the references' runs.
  SuiteOptions alone;
  alone.references = false;
  s.training_seeds = 1;
  const SuiteResult learner = run_suite(s, {"ppo(polish=0,lr=1e-3)"}, alone);
  ASSERT_EQ(learner.tasks[0].runs.size(), 1u);
  const SuiteResult merged =
      suite_from_json({write("r.json", json), write("l.json", suite_to_json(learner))});
  EXPECT_EQ(merged.agents.back(), "ppo(polish=0,lr=1e-3)");
  EXPECT_EQ(merged.tasks[0].runs.size(), 7u);
  EXPECT_THROW(suite_from_json({write("l.json", suite_to_json(learner))}), ConfigError);  // no refs
  EXPECT_THROW(suite_from_json({write("r.json", json), write("r2.json", json)}), ConfigError);
  // Two training instances kept apart to pick the policy: the training envs play the other
  // three, and both greedy episodes of every update count (20 steps each).
  SuiteSpec two = load_suite(suite("train_instances: {first: 100, count: 5}\n"
                                   "test_instances: [0, 1, 2]\ntraining_seeds: 1\n"
                                   "train_steps: 256\ntrain_envs: 2\npick_instances: 2\n"));
  EXPECT_EQ(two.pick_instances, 2);
  const SuiteRun& one_pick = learner.tasks[0].runs[0];
  const SuiteResult with_two = run_suite(two, {"ppo(polish=0,lr=1e-3)"}, alone);
  const SuiteRun& two_picks = with_two.tasks[0].runs[0];
  EXPECT_EQ(two_picks.trained_on, (std::vector<uint64_t>{100, 101, 102, 103, 104}));
  EXPECT_EQ(two_picks.train_env_steps - 256, 2 * (one_pick.train_env_steps - 256));
}

TEST_F(SuiteTest, PickInstancesLeaveSomeToTrainOn) {
  expect_error("train_instances: {first: 100, count: 4}\ntest_instances: [0]\npick_instances: 4\n",
               "pick_instances");
  expect_error("train_instances: {first: 100, count: 4}\ntest_instances: [0]\npick_instances: 0\n",
               "pick_instances");
  EXPECT_EQ(load_suite(suite("train_instances: [7, 8]\ntest_instances: [0]\n")).pick_instances, 1);
}

// Overall rows: an agent run on some tasks only gets none (no figures standing for tasks it
// did not play), and a learner's seeds min-max is each seed's mean over the tasks.
TEST(SuiteOverall, PartialAgentsHaveNoOverallAndSeedsSpanTheirMeans) {
  auto run = [](const std::string& agent, int seed, std::vector<double> tps) {
    SuiteRun r;
    r.agent = agent;
    r.training_seed = seed;
    for (double t : tps) r.episodes.push_back({0, t, 0, 0, false, ""});
    return r;
  };
  SuiteResult r;
  r.agents = {"megatron", "hindsight-static", "dynamic-oracle", "partial", "learner"};
  for (const char* name : {"a", "b"}) {
    SuiteTask t;
    t.name = name;
    t.runs = {run("megatron", -1, {1, 1}), run("hindsight-static", -1, {2, 2}),
              run("dynamic-oracle", -1, {4, 4})};
    // learner: seed 0 at hindsight-static's throughput, seed 1 at half of it, in both tasks
    t.runs.push_back(run("learner", 0, {2, 2}));
    t.runs.push_back(run("learner", 1, {1, 1}));
    if (t.name == "a") t.runs.push_back(run("partial", -1, {2, 2}));
    r.tasks.push_back(t);
  }
  for (const SuiteRow& row : suite_overall(r)) {
    if (row.agent == "partial") {
      EXPECT_TRUE(std::isnan(row.gain_share));
      EXPECT_EQ(row.vs_hindsight.point, Interval{}.point) << "an overall from one task of two";
    }
    if (row.agent == "learner") {
      EXPECT_NEAR(row.seed_low, 0.5, 1e-12);
      EXPECT_NEAR(row.seed_high, 1.0, 1e-12);
      EXPECT_NEAR(row.vs_hindsight.point, std::sqrt(0.5), 1e-12);  // pooled seeds
    }
  }
}

// An episode a failed step ended stopped before the rest of its work (a node-loss episode
// that fails before the loss skips its dearest part): counted as failed, not in the ratios.
TEST(SuiteOverall, EpisodesEndedByAFailedStepStayOutOfTheRatios) {
  auto run = [](const std::string& agent, std::vector<double> tps, std::vector<bool> failed) {
    SuiteRun r;
    r.agent = agent;
    for (size_t i = 0; i < tps.size(); ++i)
      r.episodes.push_back({i, tps[i], 0, 0, failed[i], failed[i] ? "out of memory" : ""});
    return r;
  };
  SuiteResult r;
  r.agents = {"megatron", "hindsight-static", "dynamic-oracle", "agent"};
  SuiteTask t;
  t.name = "a";
  t.runs = {run("megatron", {1, 1}, {false, false}), run("hindsight-static", {2, 2}, {false, false}),
            run("dynamic-oracle", {4, 4}, {false, false}),
            run("agent", {1, 100}, {false, true})};  // the failed one looks 50x faster
  r.tasks.push_back(t);
  bool seen = false;
  for (const SuiteRow& row : suite_overall(r)) {
    if (row.agent != "agent") continue;
    seen = true;
    EXPECT_EQ(row.failed, 1);
    EXPECT_NEAR(row.vs_hindsight.point, 0.5, 1e-12);
    EXPECT_NEAR(row.vs_megatron.point, 1.0, 1e-12);
  }
  EXPECT_TRUE(seen);
}

// A seed whose every episode of a task failed has no figure there: it leaves the seeds' range
// (per task and overall) instead of shifting the other seeds onto the wrong runs.
TEST(SuiteOverall, ASeedWithEveryEpisodeFailedLeavesTheSeedsRange) {
  auto run = [](const std::string& agent, int seed, double tp, bool failed) {
    SuiteRun r;
    r.agent = agent;
    r.training_seed = seed;
    for (uint64_t i = 0; i < 2; ++i) r.episodes.push_back({i, tp, 0, 0, failed, ""});
    return r;
  };
  SuiteResult r;
  r.agents = {"megatron", "hindsight-static", "dynamic-oracle", "learner"};
  for (const char* name : {"a", "b"}) {
    SuiteTask t;
    t.name = name;
    t.runs = {run("megatron", -1, 1, false), run("hindsight-static", -1, 2, false),
              run("dynamic-oracle", -1, 4, false)};
    // seed 0 at half of hindsight-static's throughput; seed 1 at it, but failing on task a
    t.runs.push_back(run("learner", 0, 1, false));
    t.runs.push_back(run("learner", 1, 2, t.name == std::string("a")));
    r.tasks.push_back(t);
  }
  for (const SuiteRow& row : suite_rows(r))
    if (row.agent == "learner" && row.task == "a") {
      EXPECT_NEAR(row.seed_low, 0.5, 1e-12);
      EXPECT_NEAR(row.seed_high, 0.5, 1e-12);
    }
  for (const SuiteRow& row : suite_overall(r))
    if (row.agent == "learner") {
      EXPECT_NEAR(row.seed_low, 0.5, 1e-12);  // seed 1 has no overall figure
      EXPECT_NEAR(row.seed_high, 0.5, 1e-12);
    }
}

}  // namespace
}  // namespace shardgym
