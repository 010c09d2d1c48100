// `shardgym`: the command line of the testbed. Each subcommand is a thin layer over a library
// call (config loader, training runner, trace reader, cost report, benchmark) so that tests
// exercise the same code without a process in between.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad input (command line or config), 3 live figures
// refused because the machine was too noisy to measure on (experiments/noise_gate.h). Errors are
// printed as `shardgym: <file>:<line>: <key>: <reason>` for configs, `shardgym: <reason>`
// otherwise.
#include <malloc.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/commands.h"
#include "experiments/config.h"
#include "runtime/core/training_run.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

// The live commands' noise check (experiments/noise_gate.h, docs/robustness.md).
void add_noise_options(CLI::App* cmd, shardgym::cli::NoiseArgs& a) {
  cmd->add_flag("--allow-noisy", a.allow_noisy,
                "Keep live figures the noise check refuses (the warning stays; exit 0)");
  cmd->add_option("--noise-limit", a.noise_limit,
                  "Refuse the live figures (exit 3) when the live run disagrees with itself by "
                  "more than this median fraction (default 0.20; warning at half of it)")
      ->check(CLI::Range(0.001, 10.0));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardgym::cli;
  // LibTorch allocates and frees large temporaries (PPO's [rows, blocks, catalog] logits) on
  // every op; with glibc's defaults each one is a fresh mmap and page-faults anew (a third
  // of `bench learn`'s time went to page faults). Keeping them on the heap made it ~5x faster.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{
      "ShardGym: a testbed for adaptive tensor parallelism. Agents choose per-block partition\n"
      "strategies of a (simulated or live) tensor-parallel GPT training run.",
      "shardgym"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kVersion));
  app.footer(
      "Configs: experiments/*.yaml (schema: docs/configs.md). Exit codes: 0 ok, "
      "1 runtime failure, 2 bad input.");

  bool envs_json = false;
  auto* envs = app.add_subcommand(
      "envs", "List the registered envs: description, flags and options (name, type, default).");
  envs->add_flag("--json", envs_json, "Print JSON");
  envs->footer(
      "Flags: deterministic (same seed and actions, same episode), platform_dependent\n"
      "(measurements depend on this machine), needs_libtorch, needs_trace (plays back a\n"
      "recorded trace), real_run (steps train for real). Options: the experiment YAML's\n"
      "config key, or gymnasium.make(id, config=..., name=value) in Python.");

  TrainArgs train_args;
  auto* train = app.add_subcommand("train", "Run a config's agent on its env and record a trace.");
  train->footer(
      "Learners with vectorised training (ppo) first train agent.train_steps env steps on 8\n"
      "copies of the env, and the episodes then evaluate it (greedy); without that, learners\n"
      "learn during the episodes (observe()/update()). Every step is recorded to\n"
      "DIR/trace.h5, learners are saved to DIR/agent.ckpt, and each episode's throughput\n"
      "(tokens/s, repartition included) is compared with the static Megatron-LM plan under\n"
      "the same conditions.");
  train->add_option("config", train_args.config, "Experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  train->add_option("--out", train_args.out, "Output directory (default: runs/<config name>)");
  train->add_option("--seed", train_args.seed, "Seed (default: the config's first seed)");
  train->add_option("--episodes", train_args.episodes, "Episodes (default: the config's)")
      ->check(CLI::PositiveNumber);
  train->add_option("--steps", train_args.steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);
  train->add_option("--train-steps", train_args.train_steps,
                    "Env steps of vectorised training before the episodes (learners such as "
                    "ppo; default: the config's agent.train_steps; 0 = none)")
      ->check(CLI::NonNegativeNumber);

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

  ReplayArgs replay_args;
  auto* replay = app.add_subcommand(
      "replay", "Re-execute a recorded episode and report how far it drifts from the trace.");
  replay->footer(
      "Builds the env again from the trace's config, the episode's seed and initial plan, on\n"
      "the recorded backend or --backend, plays the recorded actions and compares every\n"
      "step's reward, latency, repartition, energy, tokens and peak memory with the trace.\n"
      "Exits 1 when a figure drifts past --tolerance (default 1e-9 on the simulator, where\n"
      "the same seed reproduces a run exactly; 0.25 on live runs). A live trace re-executed\n"
      "with --backend sim shows the simulator's error on those very plans.\n"
      "  shardgym replay runs/quickstart/trace.h5 --episode 0\n"
      "  shardgym replay runs/live-quickstart/trace.h5 --backend sim --per-step");
  replay->add_option("trace", replay_args.trace, "Trace file (HDF5, shardgym-trace)")
      ->required()
      ->check(CLI::ExistingFile);
  replay->add_option("--episode", replay_args.episode, "Episode K of the trace (default 0)")
      ->check(CLI::NonNegativeNumber);
  replay->add_option("--backend", replay_args.backend, "sim or live (default: the recorded one)")
      ->check(CLI::IsMember({"sim", "live"}));
  replay->add_option("--config", replay_args.config,
                     "Use this config instead of the text stored in the trace")
      ->check(CLI::ExistingFile);
  replay->add_option("--tolerance", replay_args.tolerance,
                     "Largest relative drift allowed (default: 1e-9 sim, 0.25 live)")
      ->check(CLI::NonNegativeNumber);
  replay->add_flag("--per-step", replay_args.per_step, "Print every step's drift");
  replay->add_flag("--json", replay_args.json, "Print JSON");

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

  ValidateArgs validate_args;
  auto* validate = app.add_subcommand(
      "validate-sim",
      "The simulator against measured runs: published ones, or the live run of a config.");
  validate->footer(
      "--published: each config carries a `published:` section (the measured figures and their\n"
      "source); its initial plan (with its pipeline part, @pp(...)) runs one noise-free iteration\n"
      "on the simulator; model FLOP/s per GPU use the formula of docs/published-runs.md.\n"
      "CONFIG (a live config): N random valid plans, with repartitions between them, run on the\n"
      "live runtime (warm-up, then the median of the measured iterations) and on the simulator\n"
      "(noise-free, calibrated with --calibration or the config's cluster.calibration); prints the\n"
      "median and 90th-percentile relative error of step latency, per-block times, peak memory,\n"
      "repartition time and bytes, and Kendall's tau of the two rankings (docs/calibration.md).\n"
      "Examples: shardgym validate-sim --published experiments/validation/\n"
      "          shardgym validate-sim experiments/live-quickstart.yaml --calibration calib.yaml");
  validate->add_option("config", validate_args.config, "A live experiment config (YAML)")
      ->check(CLI::ExistingFile);
  auto* published_opt =
      validate->add_option("--published", validate_args.published,
                           "Config files, or folders whose *.yaml are all validated")
          ->check(CLI::ExistingPath);
  validate->add_option("--calibration", validate_args.calibration,
                       "Calibration file for the simulator (shardgym calibrate)")
      ->check(CLI::ExistingFile);
  validate->add_option("--plans", validate_args.plans, "Random plans (default 30)")
      ->check(CLI::Range(2, 10000));
  validate->add_option("--warmup", validate_args.warmup,
                       "Unmeasured iterations after each plan change (default 2)")
      ->check(CLI::Range(1, 1000));
  validate->add_option("--iterations", validate_args.iterations,
                       "Measured iterations per plan (default 5)")
      ->check(CLI::Range(1, 10000));
  validate->add_option("--seed", validate_args.seed, "Seed of the plan draws and the run");
  validate->add_option("--out", validate_args.out, "Also write the JSON report to this file");
  validate->add_option("--traces", validate_args.traces,
                       "Record both runs: PREFIX.live.h5 and PREFIX.sim.h5 (every iteration of "
                       "the first pass; `shardgym report` plots them against each other)");
  validate->add_flag("--drift-reference", validate_args.drift_reference,
                     "Live: also measure the calibration's drift reference plan before the "
                     "first plan and after the last (the file must record its time), print "
                     "the machine's speed against the calibration's, and the step errors at "
                     "the calibration's speed (docs/calibration.md)");
  validate->add_flag("--pipelines", validate_args.pipelines,
                     "Live: draw pipelined plans (random stage count p ≥ 2, split, m of 1, 2 "
                     "or 4, 1F1B or GPipe), as the live ranks run them (docs/calibration.md)");
  validate->add_flag("--no-repeat", validate_args.no_repeat,
                     "Skip the live run's second visit of every plan (the noise floor)");
  validate->add_flag("--json", validate_args.json, "Print JSON instead of a table");
  add_noise_options(validate, validate_args.noise);
  (void)published_opt;

  CalibrateArgs calibrate_args;
  auto* calibrate = app.add_subcommand(
      "calibrate", "Measure the live runtime of a config and fit the simulator to it.");
  calibrate->footer(
      "Runs one plan per catalog strategy on the live runtime as the config sets it up (backend,\n"
      "device, ranks, launch): a warm-up, then the median of the measured iterations of every\n"
      "block's forward, backward and communication time. Then --mixed-plans random plans. Fits\n"
      "the per-step overhead, the optimizer's time per parameter, the device's effective compute\n"
      "rate, the link's latency and bandwidth, peak memory and repartition time, and writes them\n"
      "with the machine's description and the date.\n"
      "Use the file with `cluster.calibration: FILE` in a config, or validate-sim --calibration.\n"
      "Format: docs/calibration.md.\n"
      "Example: shardgym calibrate experiments/live-quickstart.yaml --out calib.yaml");
  calibrate->add_option("config", calibrate_args.config, "A live experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  calibrate->add_option("--out", calibrate_args.out, "Calibration file to write")->required();
  calibrate->add_option("--warmup", calibrate_args.warmup,
                        "Unmeasured iterations after each plan change (default 2)")
      ->check(CLI::Range(1, 1000));
  calibrate->add_option("--iterations", calibrate_args.iterations,
                        "Measured iterations per plan (default 5)")
      ->check(CLI::Range(1, 10000));
  calibrate->add_option("--mixed-plans", calibrate_args.mixed_plans,
                        "Random plans after the uniform ones, for the overhead, memory and "
                        "repartition fits (default 24)")
      ->check(CLI::Range(0, 10000));
  calibrate->add_option("--passes", calibrate_args.passes,
                        "Passes over the uniform plans; each table entry is the median over "
                        "the passes (default 3: one pass is a single window of the machine's "
                        "time, and this machine drifts by 5-10 % from one minute to the next)")
      ->check(CLI::Range(1, 100));
  calibrate->add_flag("--no-shape-pass", calibrate_args.no_shape_pass,
                      "CPU ranks: skip the uniform plans at a small micro-batch; the device fit "
                      "is then one speed scale without a time per kernel (docs/calibration.md)");
  calibrate->add_flag("--no-drift-reference", calibrate_args.no_drift_reference,
                      "Do not measure the reference plan (the first uniform plan) beside every "
                      "plan; by default each plan's times are divided by the machine's speed "
                      "factor the reference measured around it");
  calibrate->add_option("--seed", calibrate_args.seed, "Seed of the run");
  add_noise_options(calibrate, calibrate_args.noise);
  for (int i = 0; i < argc; ++i)
    calibrate_args.command_line += (i ? " " : "") + std::string(argv[i]);

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
  bench_live->add_option("--device", live_args.device,
                         "cpu, or cuda (CUDA builds): both sides' step on GPU 0, compared by "
                         "wall clock; the repartition part stays on CPU ranks")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  bench_live->add_option("--python", live_args.python,
                         "Python with PyTorch for the eager side (default /usr/bin/python3)");
  add_noise_options(bench_live, live_args.noise);

  BenchPipelineArgs pipeline_args;
  auto* bench_pipeline = bench->add_subcommand(
      "pipeline", "Pipeline bubble of the live runtime against (p-1)/(m+p-1).");
  bench_pipeline->footer(
      "RANKS rank threads, one pipeline stage each (uniform:dp@pp(p=RANKS,m,schedule)), for\n"
      "m = 1, 2, 4, 8 under 1F1B and GPipe: step time, optimizer, the slowest stage's compute per\n"
      "micro-batch and the bubble measured, 1 - m * compute / (step - optimizer), beside the\n"
      "formula, and beside it the same pipeline in Python PyTorch eager (processes over Gloo,\n"
      "oneDNN products). Keep RANKS at most the cores. Needs the LibTorch build.\n"
      "docs/benchmarks.md.");
  bench_pipeline->add_flag("--json", pipeline_args.json, "Print JSON");
  bench_pipeline->add_option("--ranks", pipeline_args.ranks, "Ranks = stages (default 2)")
      ->check(CLI::Range(2, 64));
  bench_pipeline->add_option("--iters", pipeline_args.iters, "Timed iterations (default 5)")
      ->check(CLI::PositiveNumber);
  bench_pipeline->add_option("--warmup", pipeline_args.warmup, "Warm-up iterations (default 2)")
      ->check(CLI::NonNegativeNumber);
  bench_pipeline->add_option("--micro-batches", pipeline_args.micro_batches,
                             "Micro-batch counts (default 1 2 4 8)")
      ->check(CLI::PositiveNumber);
  bench_pipeline->add_flag("--no-python", pipeline_args.no_python,
                           "Skip the same pipeline in Python PyTorch eager");
  bench_pipeline->add_option("--python", pipeline_args.python,
                             "Python with PyTorch for the eager side (default /usr/bin/python3)");
  add_noise_options(bench_pipeline, pipeline_args.noise);

  BenchLearnArgs learn_args;
  auto* bench_learn = bench->add_subcommand(
      "learn", "Wall time for a learning agent (PPO) to reach 95% of the oracle's return.");
  bench_learn->footer(
      "Trains the agent on a vector env of the config and, after every update, plays one\n"
      "greedy evaluation episode (the clock keeps running); stops when the evaluation return\n"
      "reaches --threshold x the static oracle's on the same seed. Also prints ATP's and\n"
      "Megatron-LM's returns. Figures: docs/benchmarks.md.");
  bench_learn->add_option("config", learn_args.config, "Experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  bench_learn->add_option("--agent", learn_args.agent,
                          "Learning agent id (default: the config's agent if it learns, else ppo)");
  bench_learn->add_option("--oracle", learn_args.oracle,
                          "Reference agent: oracle (static, default) or dynamic-oracle "
                          "(scenarios with events)");
  bench_learn->add_option("--envs", learn_args.envs, "Training envs (default 8)")
      ->check(CLI::PositiveNumber);
  bench_learn->add_option("--max-steps", learn_args.max_steps,
                          "Env-step budget, summed over envs (default 400000)")
      ->check(CLI::PositiveNumber);
  bench_learn->add_option("--budget-s", learn_args.budget_s, "Wall-clock budget (default 600)")
      ->check(CLI::PositiveNumber);
  bench_learn->add_option("--threshold", learn_args.threshold,
                          "Fraction of the oracle's return (default 0.95)")
      ->check(CLI::PositiveNumber);
  bench_learn->add_flag("--keep-going", learn_args.keep_going,
                        "Train to the budget instead of stopping at the threshold");
  bench_learn->add_option("--seed", learn_args.seed, "Seed of the agent and training envs");
  bench_learn->add_option("--eval-seed", learn_args.eval_seed,
                          "Seed of the evaluation episode (default: 2^31 + the config's first seed, "
                          "which no training env or search of the learner plays)");
  bench_learn->add_option("--save", learn_args.save, "Save the agent here whenever its evaluation return is the best so far");
  bench_learn->add_flag("--json", learn_args.json, "Print JSON (with the learning curve)");

  EvalArgs eval_args;
  auto* eval = app.add_subcommand("eval", "Evaluate one agent (or a checkpoint) against Megatron-LM.");
  eval->footer(
      "One greedy episode per seed; throughput (repartition included), peak memory and\n"
      "energy per token next to the static Megatron-LM plan under the same seed.\n"
      "  shardgym eval experiments/quickstart.yaml --agent ckpt:runs/quickstart/agent.ckpt\n"
      "  shardgym eval experiments/scenarios/pcie-1node.yaml --agent atp --seeds 0,1,2");
  eval->add_option("config", eval_args.config, "Experiment config (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  eval->add_option("--agent", eval_args.agent,
                   "ckpt:PATH (the config's agent, loaded from PATH) or an agent id: megatron, "
                   "atp, oracle, dynamic-oracle, random, greedy, anneal, ppo(...), ... "
                   "(default: the config's agent)");
  eval->add_option("--checkpoint", eval_args.checkpoint,
                   "Load the agent's state from PATH (with --agent 'ppo(decode=pref)' etc.)");
  eval->add_option("--seeds", eval_args.seeds, "Seeds (default: the config's)")->delimiter(',');
  eval->add_option("--steps", eval_args.steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);
  eval->add_option("--out", eval_args.out, "Record the episodes to DIR/eval.h5");
  eval->add_option("--predicted-by", eval_args.predicted_by,
                   "A simulator config of the same model (e.g. calibrated on this cluster): "
                   "also run the agent there and print the gain over Megatron-LM it predicted "
                   "next to the measured one")
      ->check(CLI::ExistingFile);
  add_noise_options(eval, eval_args.noise);

  CompareArgs compare_args;
  auto* compare = app.add_subcommand(
      "compare", "Compare agents with static Megatron-LM over seeds (bootstrap CIs).");
  compare->footer(
      "Each agent plays one evaluation episode per seed (learners first train for\n"
      "--train-episodes episodes on other seeds, or load --checkpoint); throughput, peak\n"
      "memory and energy per token are divided by static Megatron-LM's under the same seed.\n"
      "--markdown prints the table for the README's Results section. Two reference rows\n"
      "are added: hindsight-static (the best single plan for the whole episode, chosen\n"
      "knowing its phases: \"the best static plan\") and dynamic-oracle; their ratio is\n"
      "printed as the scenario's adaptivity headroom (not run where the backend cannot\n"
      "estimate(), e.g. live runs; --no-references leaves them out).");
  compare->add_option("config", compare_args.config,
                      "Experiment config (YAML); not needed with --from-traces")
      ->check(CLI::ExistingFile);
  compare->add_option("--agents", compare_args.agents,
                      "Comma-separated agent ids (default: atp and the config's agent)");
  compare->add_option("--seeds", compare_args.seeds,
                      "Seeds (default: the config's, topped up with 0, 1, ... to 5 seeds)")
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
  compare->add_option("--from-traces", compare_args.from_traces,
                      "Rebuild the table from the traces a `compare --out DIR` recorded, "
                      "running nothing (megatron.h5 is the baseline)")
      ->check(CLI::ExistingDirectory);
  compare->add_flag("--no-references", compare_args.no_references,
                    "Leave out the hindsight-static and dynamic-oracle reference rows");
  compare->add_option("--data-shares", compare_args.data_shares,
                      "Set the config's data_shares.groups (0: no data-share choices; the "
                      "oracles then keep even shares), e.g. to read the headroom with and "
                      "without uneven shares")
      ->check(CLI::Range(0, 16));
  compare->add_option("--uneven-heads", compare_args.uneven_heads,
                      "Set the config's catalog.uneven_heads: tp1d entries up to this degree get "
                      "their uneven-shard twins (0: none), e.g. to read the headroom with and "
                      "without uneven tensor-parallel shards")
      ->check(CLI::Range(0, 64));
  compare->add_option("--out", compare_args.out,
                      "Record every evaluation episode to DIR/<agent>.h5 (default: none)");

  SuiteArgs suite_args;
  auto* suite = app.add_subcommand(
      "suite", "Train agents on a task suite's training instances; judge them on unseen ones.");
  suite->footer(
      "For every task of the suite file (docs/suite.md): learning agents train once per\n"
      "training seed on the training instances only; every agent then plays each test\n"
      "instance once. Printed per task and overall: throughput over static Megatron-LM and\n"
      "over the best static plan in hindsight (geometric means, bootstrap 95% intervals over\n"
      "instances), the share of the dynamic oracle's gain the agent realises, repartition\n"
      "time and wall time. Megatron-LM, hindsight-static and dynamic-oracle always run.\n"
      "  shardgym suite experiments/suite.yaml --agents replan,atp --markdown");
  suite->add_option("suite", suite_args.suite, "Suite file (YAML); not needed with --from-json")
      ->check(CLI::ExistingFile);
  suite->add_option("--from-json", suite_args.from_json,
                    "Print the tables of JSONs that `suite --out` wrote, merged (repeatable), "
                    "running nothing")
      ->check(CLI::ExistingFile);
  suite->add_flag("--no-references", suite_args.no_references,
                  "Run only the agents asked (needs --out; merge with a run that has the "
                  "references using --from-json)");
  suite->add_option("--agents", suite_args.agents,
                    "Comma-separated agent ids (default: the suite's `agents`)");
  suite->add_option("--tasks", suite_args.tasks,
                    "Comma-separated task names: run only these (merge runs of the others "
                    "with --from-json)");
  suite->add_option("--instances", suite_args.instances,
                    "Evaluate on the first N test instances only (quicker, wider intervals)")
      ->check(CLI::PositiveNumber);
  suite->add_option("--train-steps", suite_args.train_steps,
                    "Env steps of training per learner, task and seed (default: the suite's)")
      ->check(CLI::NonNegativeNumber);
  suite->add_option("--training-seeds", suite_args.training_seeds,
                    "Training seeds per learning agent (default: the suite's)")
      ->check(CLI::Range(1, 100));
  suite->add_option("--bootstrap-seed", suite_args.bootstrap_seed,
                    "Seed of the bootstrap resampling (default 0)");
  suite->add_flag("--markdown", suite_args.markdown, "Print markdown tables");
  suite->add_flag("--json", suite_args.json, "Print JSON (rows, overall rows, every episode)");
  suite->add_option("--out", suite_args.out, "Also write the JSON to this file");

  ReportArgs report_args;
  auto* report = app.add_subcommand(
      "report", "Figures and tables (HTML; PNG, PDF and SVG) from recorded runs.");
  report->footer(
      "Runs python -m shardgym.report (python/shardgym/report.py) with $SHARDGYM_PYTHON or the\n"
      "checkout's .venv: learning curves of `train` runs (learning.csv: return against env\n"
      "steps and wall time, rliable IQM and 95% intervals over seeds), each agent's plan per\n"
      "block over an episode, latency/memory/energy per step with the scenario's events, a\n"
      "latency-energy Pareto plot with error bars, the comparison table of each\n"
      "`compare --out` folder (rliable IQM, stratified bootstrap 95% CIs), each `suite --out`\n"
      "JSON's table, performance profiles and probability of improvement, and simulator vs\n"
      "live where both ran the same plans. Every trace is first read by `inspect --json`.\n"
      "  shardgym report runs/compare-quickstart runs/train-s0 runs/train-s1 --out report");
  report->add_option("run_dirs", report_args.run_dirs, "Folders of traces (or trace files)")
      ->required()
      ->check(CLI::ExistingPath);
  report->add_option("--out", report_args.out, "Output folder (index.html, figures as .png/.pdf/.svg, table.json)")
      ->required();
  report->add_option("--episode", report_args.episode,
                     "Complete episode K of each agent for the per-step figures (default 0)")
      ->check(CLI::NonNegativeNumber);
  report->add_option("--bootstrap-reps", report_args.bootstrap_reps,
                     "Bootstrap resamples (default 2000)")
      ->check(CLI::PositiveNumber);
  report->add_option("--seed", report_args.seed, "Seed of the bootstrap (default 0)");
  report->add_flag("--skip-damaged", report_args.skip_damaged,
                   "Leave damaged traces out (listed in the report) instead of failing");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "shardgym: " << e.what() << "\nRun with --help for more information.\n";
    return kExitBadInput;
  }

  auto dispatch = [&]() -> int {
    if (*envs) return run_envs(envs_json, std::cout);
    if (*train) return run_train(train_args, std::cout, std::cerr);
    if (*inspect) return run_inspect(trace_path, inspect_json, std::cout);
    if (*replay) return run_replay(replay_args, std::cout);
    if (*cost) return run_cost(cost_args, std::cout);
    if (*validate) return run_validate_sim(validate_args, std::cout, std::cerr);
    if (*calibrate) return run_calibrate(calibrate_args, std::cout, std::cerr);
    if (*bench_sim) return run_bench_sim(bench_args, std::cout, std::cerr);
    if (*bench_live) return run_bench_live(live_args, std::cout, std::cerr);
    if (*bench_pipeline) return run_bench_pipeline(pipeline_args, std::cout, std::cerr);
    if (*compare) return run_compare(compare_args, std::cout, std::cerr);
    if (*eval) return run_eval(eval_args, std::cout, std::cerr);
    if (*bench_learn) return run_bench_learn(learn_args, std::cout, std::cerr);
    if (*report) return run_report(report_args, std::cout);
    if (*suite) return run_suite_command(suite_args, std::cout, std::cerr);
    return kExitOk;
  };
  int rc = kExitOk;
  try {
    rc = dispatch();
  } catch (const shardgym::ConfigError& e) {
    std::cerr << "shardgym: " << e.what() << "\n";
    rc = kExitBadInput;
  } catch (const BadInput& e) {
    std::cerr << "shardgym: " << e.what() << "\n";
    rc = kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "shardgym: error: " << e.what() << "\n";
    rc = kExitFailure;
  }
  // What went wrong where nothing could throw (a live rank that stalled after the last
  // episode and was killed) still fails the command.
  for (const std::string& f : shardgym::take_late_failures()) {
    std::cerr << "shardgym: error: " << f << "\n";
    if (rc == kExitOk) rc = kExitFailure;
  }
  return rc;
}
