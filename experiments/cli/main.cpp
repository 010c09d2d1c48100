// `shardgym`: the command line of the testbed. Each subcommand is a thin layer over a library
// call (config loader, training runner, trace reader, cost report, benchmark) so that tests
// exercise the same code without a process in between.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad input (command line or config). Errors are
// printed as `shardgym: <file>:<line>: <key>: <reason>` for configs, `shardgym: <reason>`
// otherwise.
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/commands.h"
#include "experiments/config.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace shardgym::cli;
  CLI::App app{
      "ShardGym: a testbed for adaptive tensor parallelism. Agents choose per-block partition\n"
      "strategies of a (simulated or live) tensor-parallel GPT training run.",
      "shardgym"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kVersion));
  app.footer(
      "Configs: experiments/*.yaml (schema: docs/configs.md). Exit codes: 0 ok, "
      "1 runtime failure, 2 bad input.");

  auto* envs = app.add_subcommand("envs", "List the registered env ids with a description.");

  TrainArgs train_args;
  auto* train = app.add_subcommand("train", "Run a config's agent on its env and record a trace.");
  train->footer(
      "Records every step to DIR/trace.h5, feeds learning agents observe()/update() and saves\n"
      "them to DIR/agent.ckpt, then compares each episode's throughput (tokens/s, repartition\n"
      "included) with the static Megatron-LM plan under the same conditions.");
  train->add_option("config", train_args.config, "Experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  train->add_option("--out", train_args.out, "Output directory (default: runs/<config name>)");
  train->add_option("--seed", train_args.seed, "Seed (default: the config's first seed)");
  train->add_option("--episodes", train_args.episodes, "Episodes (default: the config's)")
      ->check(CLI::PositiveNumber);
  train->add_option("--steps", train_args.steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);

  std::string trace_path;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "Describe a trace file.");
  inspect->footer(
      "Schema version, env, creation time, shapes, and one line per episode (seed,\n"
      "agent, steps, return, latency, energy, how it ended).");
  inspect->add_option("trace", trace_path, "Trace file (HDF5, shardgym-trace)")
      ->required()
      ->check(CLI::ExistingFile);
  inspect->add_flag("--json", inspect_json, "Print JSON (config text included)");

  CostArgs cost_args;
  auto* cost = app.add_subcommand("cost", "Per-block cost breakdown of a plan (simulator).");
  cost->footer(
      "Compute, communication, memory and energy of every block under the simulator's cost\n"
      "model for the config's cluster, noise-free, at step 0 of the scenario.");
  cost->add_option("config", cost_args.config, "Experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  cost->add_option("--plan", cost_args.plan,
                   "megatron, megatron-sp, uniform:<strategy>, or one strategy per block "
                   "(notation: README, Strategies)")
      ->required();
  cost->add_flag("--json", cost_args.json, "Print JSON instead of a table");

  auto* bench = app.add_subcommand("bench", "Performance benchmarks.");
  bench->require_subcommand(1);
  BenchArgs bench_args;
  auto* bench_sim = bench->add_subcommand("sim", "Env steps per second of the bare simulator.");
  bench_sim->footer(
      "A 32-layer GPT on 64 simulated GPUs (8 nodes x 8), one thread, no wrappers or trace;\n"
      "plans that change 1-3 blocks every step (actions recorded before timing), and an\n"
      "unchanged plan. Target: 200,000 steps/s.");
  bench_sim->add_flag("--json", bench_args.json, "Print JSON");
  bench_sim->add_option("--seconds", bench_args.seconds, "Timed seconds per phase (default 2)")
      ->check(CLI::PositiveNumber);

  BenchLiveArgs live_args;
  auto* bench_live = bench->add_subcommand(
      "live", "Live runtime step time vs PyTorch eager, and repartition cost.");
  bench_live->footer(
      "One rank of the C++ live runtime against the same GPT in Python PyTorch eager\n"
      "(/usr/bin/python3), then a 4-rank repartition against a plain all-gather. Needs the\n"
      "LibTorch build. Figures: docs/benchmarks-live.md.");
  bench_live->add_flag("--json", live_args.json, "Print JSON");
  bench_live->add_option("--threads", live_args.threads, "Intra-op threads of both sides")
      ->check(CLI::PositiveNumber);
  bench_live->add_option("--iters", live_args.iters, "Timed iterations (default 10)")
      ->check(CLI::PositiveNumber);
  bench_live->add_option("--warmup", live_args.warmup, "Warm-up iterations (default 3)")
      ->check(CLI::NonNegativeNumber);
  bench_live->add_flag("--no-python", live_args.no_python, "Skip the PyTorch eager side");

  CompareArgs compare_args;
  auto* compare = app.add_subcommand(
      "compare", "Compare agents with static Megatron-LM over seeds (bootstrap CIs).");
  compare->footer(
      "Each agent plays one evaluation episode per seed (learners first train for\n"
      "--train-episodes episodes on other seeds, or load --checkpoint); throughput, peak\n"
      "memory and energy per token are divided by static Megatron-LM's under the same seed.\n"
      "--markdown prints the table for the README's Results section.");
  compare->add_option("config", compare_args.config, "Experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  compare->add_option("--agents", compare_args.agents,
                      "Comma-separated agent ids (default: atp and the config's agent)");
  compare->add_option("--seeds", compare_args.seeds, "Seeds (default: the config's)")
      ->delimiter(',');
  compare->add_option("--steps", compare_args.steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);
  compare
      ->add_option("--train-episodes", compare_args.train_episodes,
                   "Training episodes per seed for learning agents (default 0)")
      ->check(CLI::NonNegativeNumber);
  compare->add_option("--checkpoint", compare_args.checkpoints,
                      "AGENT=PATH: load the agent's state before evaluating (repeatable)");
  compare->add_option("--statistic", compare_args.statistic, "iqm (default), mean or median")
      ->check(CLI::IsMember({"iqm", "mean", "median"}));
  compare->add_option("--bootstrap-seed", compare_args.bootstrap_seed,
                      "Seed of the bootstrap resampling (default 0)");
  compare->add_flag("--markdown", compare_args.markdown, "Print a markdown table");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "shardgym: " << e.what() << "\nRun with --help for more information.\n";
    return kExitBadInput;
  }

  try {
    if (*envs) return run_envs(std::cout);
    if (*train) return run_train(train_args, std::cout, std::cerr);
    if (*inspect) return run_inspect(trace_path, inspect_json, std::cout);
    if (*cost) return run_cost(cost_args, std::cout);
    if (*bench_sim) return run_bench_sim(bench_args, std::cout, std::cerr);
    if (*bench_live) return run_bench_live(live_args, std::cout);
    if (*compare) return run_compare(compare_args, std::cout, std::cerr);
  } catch (const shardgym::ConfigError& e) {
    std::cerr << "shardgym: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const BadInput& e) {
    std::cerr << "shardgym: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "shardgym: error: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}
