// The `shardgym` subcommands as functions: parsed arguments in, text on the given streams
// out, exit code back. command_table.cpp binds each to its subcommand's options; main.cpp
// parses the command line and maps exceptions to exit codes: ConfigError and BadInput → 2,
// any other exception → 1.
//
// Length: one argument struct and one call per subcommand, the CLI's whole interface.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/noise_gate.h"

namespace shardgym::cli {

extern const char* const kVersion;
// The commit the binary was built from ("unknown" outside a git checkout), for traces.
extern const char* const kGitSha;

// Bad input found after parsing the command line (e.g. a --plan that does not parse).
class BadInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The noise check of live commands (experiments/noise_gate.h): --noise-limit sets the refusal
// limit on the live run's disagreement with itself (the warning is at half of it);
// --allow-noisy keeps figures past it (the warning stays).
struct NoiseArgs {
  bool allow_noisy = false;
  std::optional<double> noise_limit;
};

NoiseLimits noise_limits(const NoiseArgs& args);
// Prints the noise line (text: on `out`; JSON: the caller adds noise_json) and any warning
// on `err`; returns kExitTooNoisy when the figures are refused, else 0.
int report_noise(const NoiseReport& report, bool json, std::ostream& out, std::ostream& err);
// `object` (a JSON object's text) with a "noise" member added at its end.
std::string json_with_noise(const std::string& object, const NoiseReport& report);

struct TrainArgs {
  std::string config;
  std::string out;  // "" = runs/<config name>
  std::optional<uint64_t> seed;
  std::optional<int> episodes;
  std::optional<int> steps;
  std::optional<int> train_steps;
};

struct CostArgs {
  std::string config;
  std::string plan;
  bool json = false;
};

struct ValidateArgs {
  std::vector<std::string> published;  // configs or folders of configs with `published:`
  bool json = false;
  // Against the live run instead: a live config, N random plans.
  std::string config;
  std::string calibration;  // "" = the config's cluster.calibration (or none)
  int plans = 30, warmup = 2, iterations = 5;
  uint64_t seed = 0;
  bool no_repeat = false;
  bool pipelines = false;
  bool drift_reference = false;  // live: the calibration's reference before and after the pass
  std::string out;  // --out: also write the JSON here
  std::string traces;  // --traces PREFIX: PREFIX.live.h5 and PREFIX.sim.h5
  NoiseArgs noise;
};
// Predicted against published throughput and iteration time for every config, or (with a
// config) against the live run on random plans.
int run_validate_sim(const ValidateArgs& args, std::ostream& out, std::ostream& err);

struct CalibrateArgs {
  std::string config, out;
  int warmup = 2, iterations = 5, mixed_plans = 24, passes = 3;
  bool no_drift_reference = false;
  bool no_shape_pass = false;
  bool no_pipeline_pass = false;
  uint64_t seed = 0;
  std::string command_line;
  NoiseArgs noise;
};
// Measures the live runtime of a config and writes a calibration file.
int run_calibrate(const CalibrateArgs& args, std::ostream& out, std::ostream& err);

struct BenchArgs {
  bool json = false;
  double seconds = 2.0;
};

struct CompareArgs {
  std::string config;
  std::string agents;           // comma-separated ids; "" = atp and the config's agent
  std::vector<uint64_t> seeds;  // empty = the config's
  int train_episodes = 0;
  std::optional<int> steps;              // overrides steps_per_episode
  std::vector<std::string> checkpoints;  // AGENT=PATH
  std::string statistic = "iqm";
  uint64_t bootstrap_seed = 0;
  bool markdown = false;
  bool no_references = false;  // leave out hindsight-static and dynamic-oracle
  std::optional<int> data_shares;  // overrides data_shares.groups (0 = none)
  std::optional<int> uneven_heads;  // overrides catalog.uneven_heads (0 = none)
  std::string from_traces;     // rebuild the table from DIR's traces instead of running
  std::string out;  // "" = no traces; else DIR/<agent>.h5
};

struct SuiteArgs {
  std::string suite;
  std::vector<std::string> from_json;  // print the tables of `--out` JSONs (merged) instead
  bool no_references = false;          // run only the agents asked (JSON only)
  std::string agents;                 // comma-separated; "" = the suite's
  std::string tasks;                  // comma-separated task names; "" = every task
  std::optional<int> instances;       // only the first N test instances
  std::optional<int64_t> train_steps; // overrides the suite's
  std::optional<int> training_seeds;  // overrides the suite's
  uint64_t bootstrap_seed = 0;
  bool markdown = false, json = false;
  std::string out;                    // also write the JSON here
};
// Trains and evaluates agents on a task suite (experiments/suite.h).
int run_suite_command(const SuiteArgs& args, std::ostream& out, std::ostream& err);
// "a,b(c=1,d=2)" → {"a", "b(c=1,d=2)"}: commas inside parentheses stay.
std::vector<std::string> split_agent_list(const std::string& text);

struct ReplayArgs {
  std::string trace;
  int episode = 0;
  std::string backend;     // "" = the recorded one
  std::string config;      // "" = the trace's own
  double tolerance = -1;   // < 0 = the backend's default
  bool per_step = false;
  bool json = false;
};

struct BenchLiveArgs {
  bool json = false;
  int threads = 1;
  int iters = 10;
  int warmup = 3;
  bool no_python = false;
  std::string device = "cpu";       // "cpu" | "cuda"
  std::string python = "/usr/bin/python3";
  NoiseArgs noise;
};

struct EvalArgs {
  std::string config;
  std::string agent;            // "" = the config's agent; "ckpt:PATH" = it, loaded from PATH
  std::string checkpoint;       // load the agent from here ("" = no)
  std::vector<uint64_t> seeds;  // empty = the config's
  std::optional<int> steps;
  std::string out;              // "" = no trace; else DIR/eval.h5
  std::string predicted_by;     // a simulator config of the same model: its predicted gain too
  NoiseArgs noise;              // live configs only
};

struct BenchLearnArgs {
  std::string config;
  std::string agent;  // "" = the config's agent if it learns, else ppo
  std::string oracle = "oracle";
  int envs = 8;
  int64_t max_steps = 400000;
  double budget_s = 600;
  double threshold = 0.95;
  bool keep_going = false;  // do not stop at the threshold
  uint64_t seed = 0;
  std::optional<uint64_t> eval_seed;
  std::string save;
  bool json = false;
};

struct ReportArgs {
  std::vector<std::string> run_dirs;  // folders of traces (or trace files)
  std::string out;
  int episode = 0;  // which complete episode of each agent the per-step figures show
  int bootstrap_reps = 2000;
  uint64_t seed = 0;
  bool skip_damaged = false;
};
// Runs python/shardgym/report.py with the build's Python (commands_report.cpp).
int run_report(const ReportArgs& args, std::ostream& out);

// Throws BadInput ("OPTION: unknown agent 'x'; did you mean 'y'?") unless `id` parses and
// names a registered agent.
void check_agent_id(const std::string& id, const char* option);

// Every registered env: description, flags and options (a table each, or JSON).
int run_envs(bool json, std::ostream& out);
int run_train(const TrainArgs& args, std::ostream& out, std::ostream& err);
int run_inspect(const std::string& trace, bool json, std::ostream& out);
int run_replay(const ReplayArgs& args, std::ostream& out);
int run_cost(const CostArgs& args, std::ostream& out);
int run_bench_sim(const BenchArgs& args, std::ostream& out, std::ostream& err);
int run_compare(const CompareArgs& args, std::ostream& out, std::ostream& err);
int run_eval(const EvalArgs& args, std::ostream& out, std::ostream& err);
int run_bench_learn(const BenchLearnArgs& args, std::ostream& out, std::ostream& err);
// Throws std::runtime_error in builds without LibTorch.
int run_bench_live(const BenchLiveArgs& args, std::ostream& out, std::ostream& err);

struct BenchPipelineArgs {
  bool json = false;
  int ranks = 2;
  int iters = 5;
  int warmup = 2;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  bool no_python = false;
  std::string python = "/usr/bin/python3";
  NoiseArgs noise;
};
int run_bench_pipeline(const BenchPipelineArgs& args, std::ostream& out, std::ostream& err);

}  // namespace shardgym::cli
