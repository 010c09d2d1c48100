#include "experiments/cli/commands.h"

#include <cstdio>
#include <filesystem>

#include "analysis/table.h"
#include "datasets/trace_summary.h"
#include "env/registry.h"
#include "experiments/bench.h"
#include "experiments/config.h"
#include "experiments/progress.h"
#include "experiments/reexecute.h"
#include "experiments/train.h"
#include "runtime/sim/cost_report.h"

#include "git_sha.h"  // generated at build time: SHARDGYM_GIT_SHA
#ifndef SHARDGYM_VERSION
#define SHARDGYM_VERSION "0.0.0"
#endif

namespace shardgym::cli {

const char* const kVersion = SHARDGYM_VERSION " (" SHARDGYM_GIT_SHA ")";
const char* const kGitSha = SHARDGYM_GIT_SHA;

int run_train(const TrainArgs& args, std::ostream& out, std::ostream& err) {
  ExperimentSpec spec = load_experiment(args.config);
  TrainOptions options;
  options.out_dir =
      args.out.empty() ? (std::filesystem::path("runs") / spec.name).string() : args.out;
  options.seed = args.seed;
  options.episodes = args.episodes;
  options.steps = args.steps;
  options.train_steps = args.train_steps;
  options.git_sha = kGitSha;
  Progress progress(err, Progress::stream_is_tty(stderr));
  options.progress = &progress;

  out << "train " << spec.name << ": env " << spec.env_id << ", agent " << spec.agent.id << ", "
      << spec.model.layers << "-layer " << spec.model.family() << " on " << spec.cluster.world_size() << " GPUs ("
      << spec.cluster.num_nodes() << " node" << (spec.cluster.num_nodes() > 1 ? "s" : "") << ")\n"
      << std::flush;
  TrainResult result = run_training(spec, options);
  out << "\n"
      << training_summary(result).render(TableFormat::kText)
      << "tokens/s include repartition time; Megatron = the static Megatron-LM plan under the "
         "same conditions (noise-free).\n"
      << "trace: " << result.trace_path << "\n";
  if (!result.training.empty()) {
    const TrainProgress& last = result.training.back();
    out << "vectorised training: " << last.env_steps << " env steps in " << fixed(last.wall_s, 1)
        << " s (" << result.training.size()
        << " updates; kept the policy of update " << result.best_update
        << ", the best greedy evaluation) before the recorded episodes, which evaluate it\n";
  }
  if (!result.checkpoint_path.empty()) out << "checkpoint: " << result.checkpoint_path << "\n";
  // An episode ended by an error (a dead rank, a failed collective), not by running out of
  // memory, fails the command after the trace is written.
  int errors = 0;
  for (const EpisodeStats& e : result.episodes) {
    if (e.error.empty()) continue;
    err << "shardgym train: episode " << e.episode + 1 << " ended by an error at step "
        << e.steps << ": " << e.error << "\n";
    ++errors;
  }
  return errors > 0 ? 1 : 0;
}

int run_inspect(const std::string& trace, bool json, std::ostream& out) {
  const TraceSummary s = summarize_trace(trace);
  const std::string unchecked = check_trace_widths(s);  // throws on a mismatch
  out << (json ? to_json(s) : describe_trace(s));
  if (!json) {
    out << "widths   " << (unchecked.empty() ? "match the env its config builds"
                                             : "not checked against its config: " + unchecked)
        << "\n";
  }
  return 0;
}

int run_replay(const ReplayArgs& args, std::ostream& out) {
  ReexecuteOptions options;
  options.backend = args.backend;
  options.config = args.config;
  options.tolerance = args.tolerance;
  const DriftReport report = reexecute_episode(args.trace, args.episode, options);
  out << (args.json ? drift_json(report) : format_drift(report, args.per_step));
  return report.within_tolerance ? 0 : 1;  // 1: drifted past the tolerance, like a failed run
}

int run_cost(const CostArgs& args, std::ostream& out) {
  ExperimentSpec spec = load_experiment(args.config);
  Plan plan;
  try {
    plan = resolve_plan(args.plan, spec.model, spec.cluster);
  } catch (const std::invalid_argument& e) {
    throw BadInput(std::string("--plan: ") + e.what());
  }
  const std::string problem = plan.validate(spec.model, spec.cluster.world_size());
  if (!problem.empty()) throw BadInput("--plan: not valid for this model and cluster: " + problem);
  CostReport report = make_cost_report(spec, plan);
  out << (args.json ? to_json(report) : to_table(report));
  return 0;
}

int run_bench_sim(const BenchArgs& args, std::ostream& out, std::ostream& err) {
  BenchOptions options;
  options.seconds = args.seconds;
  if (!args.json)
    err << "bench sim: recording the action pool, then timing 2 x " << args.seconds << " s\n";
  BenchResult r = bench_sim(options);
  out << (args.json ? bench_to_json(r) : bench_to_text(r));
  return 0;
}

}  // namespace shardgym::cli
