// Task suites (`shardgym suite`, docs/suite.md): agents trained on training instances of each
// task and judged on test instances they never saw, against static Megatron-LM, the best
// static plan in hindsight and the dynamic oracle.
//
//   SuiteSpec suite = load_suite("experiments/suite.yaml");
//   SuiteResult r = run_suite(suite, {"megatron", "replan"}, {});
//   std::cout << format_suite(r, TableFormat::kMarkdown);
//
// A task is an experiment config whose scenario draws its events (core/scenario_draw.h); an
// instance is a seed. The suite file fixes the training and test instances, and they never
// overlap (load_suite refuses a file where they do). For each task:
//   - every agent plays one greedy episode per test instance (instance i, noise seed i);
//   - a learning agent is first trained, once per training seed, on envs of training
//     instances only (env k on training instance k mod n), and the update it keeps is chosen
//     by a greedy episode on a training instance; then each trained copy plays the test
//     instances;
//   - Megatron-LM, hindsight-static and dynamic-oracle always run (the references).
// Figures per task and agent: throughput over Megatron-LM's and over hindsight-static's on the
// same instance, as geometric means over test instances with a percentile-bootstrap 95 %
// interval over instances; the share of the dynamic oracle's gain over hindsight-static the
// agent realises (Σ log(agent / hindsight) / Σ log(oracle / hindsight) over instances);
// repartition time per episode; wall time of training and evaluation. Learners: the median
// over training seeds, with the lowest and highest seed's figure. Overall: the geometric mean
// over tasks (a stratified bootstrap: instances resampled within each task).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "analysis/table.h"
#include "runtime/core/experiment_spec.h"

namespace shardgym {

struct SuiteSpec {
  std::string name;
  std::string path;                      // the suite file
  std::vector<std::string> task_paths;   // resolved against the suite file's folder
  std::vector<ExperimentSpec> tasks;     // loaded and checked by load_suite
  std::vector<uint64_t> train_instances;
  std::vector<uint64_t> test_instances;
  std::vector<std::string> agents;       // the file's default agents
  int training_seeds = 5;                // per learning agent
  int64_t train_steps = 20000;           // env steps per learner, task and training seed
  int train_envs = 8;                    // envs of vectorised training
  // Training instances held out of the training envs to pick the policy kept (the last ones
  // of train_instances): the update whose greedy episodes on them return most on average.
  int pick_instances = 1;
};

// Reads a suite file (docs/suite.md): name, tasks, train_instances, test_instances (each a
// list or {first, count}), agents, training_seeds, train_steps, train_envs, pick_instances
// (fewer than the training instances). Every task is
// loaded with load_experiment. Throws ConfigError naming file, key and reason: unknown keys,
// a task that does not load or runs no simulator, instances given twice or in both sets.
SuiteSpec load_suite(const std::string& path);

struct SuiteEpisode {
  uint64_t instance = 0;
  double throughput = 0;     // tokens/s, repartitions included
  double repartition_s = 0;  // in the episode
  double wall_s = 0;
  bool failed = false;       // ended by a failed step: left out of the ratios (task_logs)
  std::string error;         // the failed step's error (progress lines; not in the JSON)
};

struct SuiteRun {            // one agent (one training seed of a learner) on one task
  std::string agent;
  int training_seed = -1;    // -1: the agent does not learn
  double train_wall_s = 0;
  int64_t train_env_steps = 0;
  std::vector<uint64_t> trained_on;    // every instance training played (envs and picking)
  std::vector<SuiteEpisode> episodes;  // per test instance, in order
};

struct SuiteTask {
  std::string name;
  std::vector<SuiteRun> runs;  // references first (megatron, hindsight-static, dynamic-oracle)
};

// The reference agents every suite table needs, in table order.
inline constexpr const char* kSuiteReferences[] = {"megatron", "hindsight-static",
                                                   "dynamic-oracle"};
// The first run of `agent` in the task; nullptr when it has none.
const SuiteRun* find_suite_run(const SuiteTask& t, const std::string& agent);

struct SuiteResult {
  std::string name;
  std::vector<uint64_t> test_instances;
  std::vector<std::string> agents;  // as asked (references added)
  std::vector<SuiteTask> tasks;
};

struct SuiteOptions {
  std::function<void(const std::string&)> on_progress;  // one line per episode / training
  BootstrapOptions bootstrap;
  // Off: only the agents asked run (no Megatron-LM, hindsight-static, dynamic-oracle); the
  // JSON then needs merging with one that has them before a table can be printed.
  bool references = true;
};

// Runs `agents` (empty: the suite's) on every task. Throws std::invalid_argument for an
// unknown agent before anything runs.
SuiteResult run_suite(const SuiteSpec& suite, std::vector<std::string> agents,
                      const SuiteOptions& options);

// Per (task, agent): the figures of the header comment.
struct SuiteRow {
  std::string task, agent;
  int runs = 0;                      // training seeds (1 for agents that do not learn)
  Interval vs_megatron, vs_hindsight;  // geometric means over instances, bootstrap 95 %
  double seed_low = 0, seed_high = 0;  // learners: lowest / highest seed's vs_hindsight
  double gain_share = 0;             // NaN where the oracle gains nothing
  double headroom = 1;               // dynamic-oracle / hindsight-static (geometric mean)
  double repartition_s = 0;          // mean per episode
  double train_wall_s = 0, eval_wall_s = 0;
  int failed = 0;                    // episodes ended by a failed step
};
std::vector<SuiteRow> suite_rows(const SuiteResult& r, const BootstrapOptions& bootstrap = {});
// The same over every task ("overall" rows, one per agent).
std::vector<SuiteRow> suite_overall(const SuiteResult& r, const BootstrapOptions& bootstrap = {});

std::string format_suite(const SuiteResult& r, TableFormat format,
                         const BootstrapOptions& bootstrap = {});
std::string suite_to_json(const SuiteResult& r, const BootstrapOptions& bootstrap = {});
// Reads back what suite_to_json wrote (its `runs` and `episodes`), to print the tables again
// without running anything. Throws ConfigError at the offending key.
// With several files, their runs are merged into one table (the same suite and test
// instances; a (task, agent, training seed) in two files is an error), e.g. references from
// one run and learners from runs made with SuiteOptions::references off.
SuiteResult suite_from_json(const std::vector<std::string>& paths);

}  // namespace shardgym
