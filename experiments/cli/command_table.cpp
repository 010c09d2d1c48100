// The `shardgym` command table: one function per subcommand registers its options and help
// on the parent command and returns the call to make when it was chosen, like git's builtin
// table. main.cpp walks the table, parses, and maps exceptions to exit codes; the commands
// themselves are the run_* functions of commands.h.
#include "experiments/cli/command_table.h"

#include <memory>
#include <string>

#include "experiments/cli/commands.h"

namespace shardgym::cli {
namespace {

struct FlagArgs {
  bool json = false;
};

struct InspectArgs {
  std::string trace;
  bool json = false;
};

// The live commands' noise check (experiments/noise_gate.h, docs/robustness.md).
void add_noise_options(CLI::App* cmd, shardgym::cli::NoiseArgs& a) {
  cmd->add_flag("--allow-noisy", a.allow_noisy,
                "Keep live figures the noise check refuses (the warning stays; exit 0)");
  cmd->add_option("--noise-limit", a.noise_limit,
                  "Refuse the live figures (exit 3) when the live run disagrees with itself by "
                  "more than this median fraction (default 0.20; warning at half of it)")
      ->check(CLI::Range(0.001, 10.0));
}

// A required positional that names an existing file (a config, a trace).
void add_input_file(CLI::App* cmd, const std::string& name, std::string& into,
                    const std::string& help) {
  cmd->add_option(name, into, help)->required()->check(CLI::ExistingFile);
}

// The call of a subcommand whose options were parsed into *a.
template <class Args>
Command bind(CLI::App* cmd, std::shared_ptr<Args> a,
             int (*run)(const Args&, std::ostream&, std::ostream&)) {
  return {cmd, [a, run](std::ostream& out, std::ostream& err) { return run(*a, out, err); }};
}
// The same for a command that writes to `out` only.
template <class Args>
Command bind(CLI::App* cmd, std::shared_ptr<Args> a, int (*run)(const Args&, std::ostream&)) {
  return {cmd, [a, run](std::ostream& out, std::ostream&) { return run(*a, out); }};
}

Command add_envs(CLI::App& parent, const Context&) {
  auto a = std::make_shared<FlagArgs>();
  auto* cmd = parent.add_subcommand(
      "envs", "List the registered envs: description, flags and options (name, type, default).");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->footer(
      "Flags: deterministic (same seed and actions, same episode), platform_dependent\n"
      "(measurements depend on this machine), needs_libtorch, needs_trace (plays back a\n"
      "recorded trace), real_run (steps train for real). Options: the experiment YAML's\n"
      "config key, or gymnasium.make(id, config=..., name=value) in Python.");
  return {cmd, [a](std::ostream& out, std::ostream&) { return run_envs(a->json, out); }};
}

Command add_train(CLI::App& parent, const Context&) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = parent.add_subcommand("train", "Run a config's agent on its env and record a trace.");
  cmd->footer(
      "Learners with vectorised training (ppo) first train agent.train_steps env steps on 8\n"
      "copies of the env, and the episodes then evaluate it (greedy); without that, learners\n"
      "learn during the episodes (observe()/update()). Every step is recorded to\n"
      "DIR/trace.h5, learners are saved to DIR/agent.ckpt, and each episode's throughput\n"
      "(tokens/s, repartition included) is compared with the static Megatron-LM plan under\n"
      "the same conditions.");
  add_input_file(cmd, "config", a->config, "Experiment config (YAML)");
  cmd->add_option("--out", a->out, "Output directory (default: runs/<config name>)");
  cmd->add_option("--seed", a->seed, "Seed (default: the config's first seed)");
  cmd->add_option("--episodes", a->episodes, "Episodes (default: the config's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--steps", a->steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--train-steps", a->train_steps,
                  "Env steps of vectorised training before the episodes (learners such as "
                  "ppo; default: the config's agent.train_steps; 0 = none)")
      ->check(CLI::NonNegativeNumber);
  return bind(cmd, a, run_train);
}

Command add_inspect(CLI::App& parent, const Context&) {
  auto a = std::make_shared<InspectArgs>();
  auto* cmd = parent.add_subcommand("inspect", "Describe a trace file.");
  cmd->footer(
      "Schema version, env, creation time, shapes, and one line per episode (seed,\n"
      "agent, steps, return, latency, energy, how it ended).");
  add_input_file(cmd, "trace", a->trace, "Trace file (HDF5, shardgym-trace)");
  cmd->add_flag("--json", a->json, "Print JSON (config text included)");
  return {cmd,
          [a](std::ostream& out, std::ostream&) { return run_inspect(a->trace, a->json, out); }};
}

Command add_replay(CLI::App& parent, const Context&) {
  auto a = std::make_shared<ReplayArgs>();
  auto* cmd = parent.add_subcommand(
      "replay", "Re-execute a recorded episode and report how far it drifts from the trace.");
  cmd->footer(
      "Builds the env again from the trace's config, the episode's seed and initial plan, on\n"
      "the recorded backend or --backend, plays the recorded actions and compares every\n"
      "step's reward, latency, repartition, energy, tokens and peak memory with the trace.\n"
      "Exits 1 when a figure drifts past --tolerance (default 1e-9 on the simulator, where\n"
      "the same seed reproduces a run exactly; 0.25 on live runs). A live trace re-executed\n"
      "with --backend sim shows the simulator's error on those very plans.\n"
      "  shardgym replay runs/quickstart/trace.h5 --episode 0\n"
      "  shardgym replay runs/live-quickstart/trace.h5 --backend sim --per-step");
  add_input_file(cmd, "trace", a->trace, "Trace file (HDF5, shardgym-trace)");
  cmd->add_option("--episode", a->episode, "Episode K of the trace (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--backend", a->backend, "sim or live (default: the recorded one)")
      ->check(CLI::IsMember({"sim", "live"}));
  cmd->add_option("--config", a->config, "Use this config instead of the text stored in the trace")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tolerance", a->tolerance,
                  "Largest relative drift allowed (default: 1e-9 sim, 0.25 live)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--per-step", a->per_step, "Print every step's drift");
  cmd->add_flag("--json", a->json, "Print JSON");
  return bind(cmd, a, run_replay);
}

Command add_cost(CLI::App& parent, const Context&) {
  auto a = std::make_shared<CostArgs>();
  auto* cmd = parent.add_subcommand("cost", "Per-block cost breakdown of a plan (simulator).");
  cmd->footer(
      "Compute, communication, memory and energy of every block under the simulator's cost\n"
      "model for the config's cluster, noise-free, at step 0 of the scenario.");
  add_input_file(cmd, "config", a->config, "Experiment config (YAML)");
  cmd->add_option("--plan", a->plan,
                  "megatron, megatron-sp, uniform:<strategy>, or one strategy per block "
                  "(notation: README, Strategies)")
      ->required();
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  return bind(cmd, a, run_cost);
}

Command add_validate_sim(CLI::App& parent, const Context&) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = parent.add_subcommand(
      "validate-sim",
      "The simulator against measured runs: published ones, or the live run of a config.");
  cmd->footer(
      "--published: each config carries a `published:` section (the measured figures and their\n"
      "source); its initial plan (with its pipeline part, @pp(...)) runs one noise-free iteration\n"
      "on the simulator; model FLOP/s per GPU use the formula of docs/published-runs.md.\n"
      "CONFIG (a live config): N random valid plans, with repartitions between them, run on the\n"
      "live runtime (warm-up, then the median of the measured iterations) and on the simulator\n"
      "(noise-free, calibrated with --calibration or the config's cluster.calibration); prints "
      "the\n"
      "median and 90th-percentile relative error of step latency, per-block times, peak memory,\n"
      "repartition time and bytes, and Kendall's tau of the two rankings (docs/calibration.md).\n"
      "Examples: shardgym validate-sim --published experiments/validation/\n"
      "          shardgym validate-sim experiments/live-quickstart.yaml --calibration calib.yaml");
  cmd->add_option("config", a->config, "A live experiment config (YAML)")->check(CLI::ExistingFile);
  cmd->add_option("--published", a->published,
                  "Config files, or folders whose *.yaml are all validated")
      ->check(CLI::ExistingPath);
  cmd->add_option("--calibration", a->calibration,
                  "Calibration file for the simulator (shardgym calibrate)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--plans", a->plans, "Random plans (default 30)")->check(CLI::Range(2, 10000));
  cmd->add_option("--warmup", a->warmup, "Unmeasured iterations after each plan change (default 2)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--iterations", a->iterations, "Measured iterations per plan (default 5)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--seed", a->seed, "Seed of the plan draws and the run");
  cmd->add_option("--out", a->out, "Also write the JSON report to this file");
  cmd->add_option("--traces", a->traces,
                  "Record both runs: PREFIX.live.h5 and PREFIX.sim.h5 (every iteration of "
                  "the first pass; `shardgym report` plots them against each other)");
  cmd->add_flag("--drift-reference", a->drift_reference,
                "Live: also measure the calibration's drift reference plan before the "
                "first plan and after the last (the file must record its time), print "
                "the machine's speed against the calibration's, and the step errors at "
                "the calibration's speed (docs/calibration.md)");
  cmd->add_flag("--pipelines", a->pipelines,
                "Live: draw pipelined plans (random stage count p ≥ 2, split, m of 1, 2 "
                "or 4, 1F1B or GPipe), as the live ranks run them (docs/calibration.md)");
  cmd->add_flag("--no-repeat", a->no_repeat,
                "Skip the live run's second visit of every plan (the noise floor)");
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  add_noise_options(cmd, a->noise);
  return bind(cmd, a, run_validate_sim);
}

Command add_calibrate(CLI::App& parent, const Context& context) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd = parent.add_subcommand(
      "calibrate", "Measure the live runtime of a config and fit the simulator to it.");
  cmd->footer(
      "Runs one plan per catalog strategy on the live runtime as the config sets it up (backend,\n"
      "device, ranks, launch): a warm-up, then the median of the measured iterations of every\n"
      "block's forward, backward and communication time. Then --mixed-plans random plans. Fits\n"
      "the per-step overhead, the optimizer's time per parameter, the device's effective compute\n"
      "rate, the link's latency and bandwidth, peak memory and repartition time, and writes them\n"
      "with the machine's description and the date. Then the pipeline pass: the schedule's fill\n"
      "and drain on pipelined uniform plans, printed against the simulator just calibrated.\n"
      "Use the file with `cluster.calibration: FILE` in a config, or validate-sim --calibration.\n"
      "Format: docs/calibration.md.\n"
      "Example: shardgym calibrate experiments/live-quickstart.yaml --out calib.yaml");
  add_input_file(cmd, "config", a->config, "A live experiment config (YAML)");
  cmd->add_option("--out", a->out, "Calibration file to write")->required();
  cmd->add_option("--warmup", a->warmup, "Unmeasured iterations after each plan change (default 2)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--iterations", a->iterations, "Measured iterations per plan (default 5)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--mixed-plans", a->mixed_plans,
                  "Random plans after the uniform ones, for the overhead, memory and "
                  "repartition fits (default 24)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--passes", a->passes,
                  "Passes over the uniform plans; each table entry is the median over "
                  "the passes (default 3: one pass is a single window of the machine's "
                  "time, and this machine drifts by 5-10 % from one minute to the next)")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--no-shape-pass", a->no_shape_pass,
                "CPU ranks: skip the uniform plans at a small micro-batch; the device fit "
                "is then one speed scale without a time per kernel (docs/calibration.md)");
  cmd->add_flag("--no-pipeline-pass", a->no_pipeline_pass,
                "Skip the pipelined uniform plans (every stage count the world allows, "
                "m = 1, 2, 4, 1F1B and GPipe) that measure the schedule's fill and drain "
                "and are printed against the simulator the file calibrates");
  cmd->add_flag("--no-drift-reference", a->no_drift_reference,
                "Do not measure the reference plan (the first uniform plan) beside every "
                "plan; by default each plan's times are divided by the machine's speed "
                "factor the reference measured around it");
  cmd->add_option("--seed", a->seed, "Seed of the run");
  add_noise_options(cmd, a->noise);
  a->command_line = context.command_line;
  return bind(cmd, a, run_calibrate);
}

Command add_bench_sim(CLI::App& parent, const Context&) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = parent.add_subcommand("sim", "Env steps per second of the bare simulator.");
  cmd->footer(
      "A 32-layer GPT on 64 simulated GPUs (8 nodes x 8), one thread, no wrappers or trace;\n"
      "plans that change 1-3 blocks every step (actions recorded before timing), and an\n"
      "unchanged plan. Target: 200,000 steps/s.");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_option("--seconds", a->seconds, "Timed seconds per phase (default 2)")
      ->check(CLI::PositiveNumber);
  return bind(cmd, a, run_bench_sim);
}

Command add_bench_live(CLI::App& parent, const Context&) {
  auto a = std::make_shared<BenchLiveArgs>();
  auto* cmd = parent.add_subcommand(
      "live", "Live runtime step time vs PyTorch eager, and repartition cost.");
  cmd->footer(
      "One rank of the C++ live runtime against the same GPT in Python PyTorch eager\n"
      "(/usr/bin/python3), then a 4-rank repartition against a plain all-gather. Needs the\n"
      "LibTorch build. Figures: docs/benchmarks-live.md.");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_option("--threads", a->threads, "Intra-op threads of both sides")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--iters", a->iters, "Timed iterations (default 10)")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "Warm-up iterations (default 3)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-python", a->no_python, "Skip the PyTorch eager side");
  cmd->add_option("--device", a->device,
                  "cpu, or cuda (CUDA builds): both sides' step on GPU 0, compared by "
                  "wall clock; the repartition part stays on CPU ranks")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--python", a->python,
                  "Python with PyTorch for the eager side (default /usr/bin/python3)");
  add_noise_options(cmd, a->noise);
  return bind(cmd, a, run_bench_live);
}

Command add_bench_pipeline(CLI::App& parent, const Context&) {
  auto a = std::make_shared<BenchPipelineArgs>();
  auto* cmd = parent.add_subcommand("pipeline",
                                    "Pipeline bubble of the live runtime against (p-1)/(m+p-1).");
  cmd->footer(
      "RANKS rank threads, one pipeline stage each (uniform:dp@pp(p=RANKS,m,schedule)), for\n"
      "m = 1, 2, 4, 8 under 1F1B and GPipe: step time, optimizer, the slowest stage's compute per\n"
      "micro-batch and the bubble measured, 1 - m * compute / (step - optimizer), beside the\n"
      "formula, and beside it the same pipeline in Python PyTorch eager (processes over Gloo,\n"
      "oneDNN products). Keep RANKS at most the cores. Needs the LibTorch build.\n"
      "docs/benchmarks.md.");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_option("--ranks", a->ranks, "Ranks = stages (default 2)")->check(CLI::Range(2, 64));
  cmd->add_option("--iters", a->iters, "Timed iterations (default 5)")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "Warm-up iterations (default 2)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--micro-batches", a->micro_batches, "Micro-batch counts (default 1 2 4 8)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-python", a->no_python, "Skip the same pipeline in Python PyTorch eager");
  cmd->add_option("--python", a->python,
                  "Python with PyTorch for the eager side (default /usr/bin/python3)");
  add_noise_options(cmd, a->noise);
  return bind(cmd, a, run_bench_pipeline);
}

Command add_bench_learn(CLI::App& parent, const Context&) {
  auto a = std::make_shared<BenchLearnArgs>();
  auto* cmd = parent.add_subcommand(
      "learn", "Wall time for a learning agent (PPO) to reach 95% of the oracle's return.");
  cmd->footer(
      "Trains the agent on a vector env of the config and, after every update, plays one\n"
      "greedy evaluation episode (the clock keeps running); stops when the evaluation return\n"
      "reaches --threshold x the static oracle's on the same seed. Also prints ATP's and\n"
      "Megatron-LM's returns. Figures: docs/benchmarks.md.");
  add_input_file(cmd, "config", a->config, "Experiment config (YAML)");
  cmd->add_option("--agent", a->agent,
                  "Learning agent id (default: the config's agent if it learns, else ppo)");
  cmd->add_option("--oracle", a->oracle,
                  "Reference agent: oracle (static, default) or dynamic-oracle "
                  "(scenarios with events; its return-optimal schedule, objective=return)");
  cmd->add_option("--envs", a->envs, "Training envs (default 8)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-steps", a->max_steps, "Env-step budget, summed over envs (default 400000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--budget-s", a->budget_s, "Wall-clock budget (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threshold", a->threshold, "Fraction of the oracle's return (default 0.95)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--keep-going", a->keep_going,
                "Train to the budget instead of stopping at the threshold");
  cmd->add_option("--seed", a->seed, "Seed of the agent and training envs");
  cmd->add_option("--eval-seed", a->eval_seed,
                  "Seed of the evaluation episode (default: 2^31 + the config's first seed, "
                  "which no training env or search of the learner plays)");
  cmd->add_option("--save", a->save,
                  "Save the agent here whenever its evaluation return is the best so far");
  cmd->add_flag("--json", a->json, "Print JSON (with the learning curve)");
  return bind(cmd, a, run_bench_learn);
}

Command add_eval(CLI::App& parent, const Context&) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd =
      parent.add_subcommand("eval", "Evaluate one agent (or a checkpoint) against Megatron-LM.");
  cmd->footer(
      "One greedy episode per seed; throughput (repartition included), peak memory and\n"
      "energy per token next to the static Megatron-LM plan under the same seed.\n"
      "  shardgym eval experiments/quickstart.yaml --agent ckpt:runs/quickstart/agent.ckpt\n"
      "  shardgym eval experiments/scenarios/pcie-1node.yaml --agent atp --seeds 0,1,2");
  add_input_file(cmd, "config", a->config, "Experiment config (YAML)");
  cmd->add_option("--agent", a->agent,
                  "ckpt:PATH (the config's agent, loaded from PATH) or an agent id: megatron, "
                  "atp, oracle, dynamic-oracle, random, greedy, anneal, ppo(...), ... "
                  "(default: the config's agent)");
  cmd->add_option("--checkpoint", a->checkpoint,
                  "Load the agent's state from PATH (with --agent 'ppo(decode=pref)' etc.)");
  cmd->add_option("--seeds", a->seeds, "Seeds (default: the config's)")->delimiter(',');
  cmd->add_option("--steps", a->steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", a->out, "Record the episodes to DIR/eval.h5");
  cmd->add_option("--predicted-by", a->predicted_by,
                  "A simulator config of the same model (e.g. calibrated on this cluster): "
                  "also run the agent there and print the gain over Megatron-LM it predicted "
                  "next to the measured one")
      ->check(CLI::ExistingFile);
  add_noise_options(cmd, a->noise);
  return bind(cmd, a, run_eval);
}

Command add_compare(CLI::App& parent, const Context&) {
  auto a = std::make_shared<CompareArgs>();
  auto* cmd = parent.add_subcommand(
      "compare", "Compare agents with static Megatron-LM over seeds (bootstrap CIs).");
  cmd->footer(
      "Each agent plays one evaluation episode per seed (learners first train for\n"
      "--train-episodes episodes on other seeds, or load --checkpoint); throughput, peak\n"
      "memory and energy per token are divided by static Megatron-LM's under the same seed.\n"
      "--markdown prints the table for the README's Results section. Two reference rows\n"
      "are added: hindsight-static (the best single plan for the whole episode, chosen\n"
      "knowing its phases: \"the best static plan\") and dynamic-oracle; their ratio is\n"
      "printed as the scenario's adaptivity headroom (not run where the backend cannot\n"
      "estimate(), e.g. live runs; --no-references leaves them out).");
  cmd->add_option("config", a->config, "Experiment config (YAML); not needed with --from-traces")
      ->check(CLI::ExistingFile);
  cmd->add_option("--agents", a->agents,
                  "Comma-separated agent ids (default: atp and the config's agent)");
  cmd->add_option("--seeds", a->seeds,
                  "Seeds (default: the config's, topped up with 0, 1, ... to 5 seeds)")
      ->delimiter(',');
  cmd->add_option("--steps", a->steps, "Steps per episode (default: the config's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--train-episodes", a->train_episodes,
                  "Training episodes per seed for learning agents (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint", a->checkpoints,
                  "AGENT=PATH: load the agent's state before evaluating (repeatable)");
  cmd->add_option("--statistic", a->statistic, "iqm (default), mean or median")
      ->check(CLI::IsMember({"iqm", "mean", "median"}));
  cmd->add_option("--bootstrap-seed", a->bootstrap_seed,
                  "Seed of the bootstrap resampling (default 0)");
  cmd->add_flag("--markdown", a->markdown, "Print a markdown table");
  cmd->add_option("--from-traces", a->from_traces,
                  "Rebuild the table from the traces a `compare --out DIR` recorded, "
                  "running nothing (megatron.h5 is the baseline)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--no-references", a->no_references,
                "Leave out the hindsight-static and dynamic-oracle reference rows");
  cmd->add_option("--data-shares", a->data_shares,
                  "Set the config's data_shares.groups (0: no data-share choices; the "
                  "oracles then keep even shares), e.g. to read the headroom with and "
                  "without uneven shares")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--uneven-heads", a->uneven_heads,
                  "Set the config's catalog.uneven_heads: tp1d entries up to this degree get "
                  "their uneven-shard twins (0: none), e.g. to read the headroom with and "
                  "without uneven tensor-parallel shards")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--out", a->out,
                  "Record every evaluation episode to DIR/<agent>.h5 (default: none)");
  return bind(cmd, a, run_compare);
}

Command add_suite(CLI::App& parent, const Context&) {
  auto a = std::make_shared<SuiteArgs>();
  auto* cmd = parent.add_subcommand(
      "suite", "Train agents on a task suite's training instances; judge them on unseen ones.");
  cmd->footer(
      "For every task of the suite file (docs/suite.md): learning agents train once per\n"
      "training seed on the training instances only; every agent then plays each test\n"
      "instance once. Printed per task and overall: throughput over static Megatron-LM and\n"
      "over the best static plan in hindsight (geometric means, bootstrap 95% intervals over\n"
      "instances), the share of the dynamic oracle's gain the agent realises, repartition\n"
      "time and wall time. Megatron-LM, hindsight-static and dynamic-oracle always run.\n"
      "  shardgym suite experiments/suite.yaml --agents replan,atp --markdown");
  cmd->add_option("suite", a->suite, "Suite file (YAML); not needed with --from-json")
      ->check(CLI::ExistingFile);
  cmd->add_option("--from-json", a->from_json,
                  "Print the tables of JSONs that `suite --out` wrote, merged (repeatable), "
                  "running nothing")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-references", a->no_references,
                "Run only the agents asked (needs --out; merge with a run that has the "
                "references using --from-json)");
  cmd->add_option("--agents", a->agents,
                  "Comma-separated agent ids (default: the suite's `agents`)");
  cmd->add_option("--tasks", a->tasks,
                  "Comma-separated task names: run only these (merge runs of the others "
                  "with --from-json)");
  cmd->add_option("--instances", a->instances,
                  "Evaluate on the first N test instances only (quicker, wider intervals)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--train-steps", a->train_steps,
                  "Env steps of training per learner, task and seed (default: the suite's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--training-seeds", a->training_seeds,
                  "Training seeds per learning agent (default: the suite's)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--bootstrap-seed", a->bootstrap_seed,
                  "Seed of the bootstrap resampling (default 0)");
  cmd->add_flag("--markdown", a->markdown, "Print markdown tables");
  cmd->add_flag("--json", a->json, "Print JSON (rows, overall rows, every episode)");
  cmd->add_option("--out", a->out, "Also write the JSON to this file");
  return bind(cmd, a, run_suite_command);
}

Command add_report(CLI::App& parent, const Context&) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = parent.add_subcommand(
      "report", "Figures and tables (HTML; PNG, PDF and SVG) from recorded runs.");
  cmd->footer(
      "Runs python -m shardgym.report (python/shardgym/report.py) with $SHARDGYM_PYTHON or the\n"
      "checkout's .venv: learning curves of `train` runs (learning.csv: return against env\n"
      "steps and wall time, rliable IQM and 95% intervals over seeds), each agent's plan per\n"
      "block over an episode, latency/memory/energy per step with the scenario's events, a\n"
      "latency-energy Pareto plot with error bars, the comparison table of each\n"
      "`compare --out` folder (rliable IQM, stratified bootstrap 95% CIs), each `suite --out`\n"
      "JSON's table, performance profiles and probability of improvement, and simulator vs\n"
      "live where both ran the same plans. Every trace is first read by `inspect --json`.\n"
      "  shardgym report runs/compare-quickstart runs/train-s0 runs/train-s1 --out report");
  cmd->add_option("run_dirs", a->run_dirs, "Folders of traces (or trace files)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--out", a->out,
                  "Output folder (index.html, figures as .png/.pdf/.svg, table.json)")
      ->required();
  cmd->add_option("--episode", a->episode,
                  "Complete episode K of each agent for the per-step figures (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--bootstrap-reps", a->bootstrap_reps, "Bootstrap resamples (default 2000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->seed, "Seed of the bootstrap (default 0)");
  cmd->add_flag("--skip-damaged", a->skip_damaged,
                "Leave damaged traces out (listed in the report) instead of failing");
  return bind(cmd, a, run_report);
}

// `bench`'s subcommands hang off this group; one of them is required.
Command add_bench(CLI::App& parent, const Context& context, std::vector<Command>& commands) {
  auto* cmd = parent.add_subcommand("bench", "Performance benchmarks.");
  cmd->require_subcommand(1);
  for (auto* add : {add_bench_sim, add_bench_live, add_bench_pipeline, add_bench_learn})
    commands.push_back(add(*cmd, context));
  return {cmd, nullptr};
}

}  // namespace

std::vector<Command> add_commands(CLI::App& app, const Context& context) {
  std::vector<Command> commands;
  // In the order `shardgym --help` lists them.
  for (auto* add :
       {add_envs, add_train, add_inspect, add_replay, add_cost, add_validate_sim, add_calibrate})
    commands.push_back(add(app, context));
  commands.push_back(add_bench(app, context, commands));
  for (auto* add : {add_eval, add_compare, add_suite, add_report})
    commands.push_back(add(app, context));
  return commands;
}

}  // namespace shardgym::cli
