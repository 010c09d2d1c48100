// `shardgym eval` (one agent, one evaluation episode per seed, against static Megatron-LM)
// and `shardgym bench learn` (experiments/bench_learning.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "agents/evaluate.h"
#include "analysis/stats.h"
#include "analysis/table.h"
#include "datasets/trace_writer.h"
#include "env/registry.h"
#include "env/wrappers.h"
#include "experiments/bench_learning.h"
#include "experiments/cli/commands.h"
#include "experiments/config.h"
#include "experiments/progress.h"

namespace shardgym::cli {

namespace {

// The agent id and checkpoint `eval` plays: --agent (an id, or ckpt:PATH for the config's
// agent loaded from PATH) and --checkpoint, else the config's agent and checkpoint.
std::pair<std::string, std::string> eval_agent(const EvalArgs& args, const ExperimentSpec& spec) {
  std::string id = args.agent, checkpoint;
  if (id.empty()) {
    id = spec.agent.id;
    checkpoint = spec.agent.checkpoint;
  } else if (id.rfind("ckpt:", 0) == 0) {
    checkpoint = id.substr(5);
    id = spec.agent.id;
    if (checkpoint.empty()) throw BadInput("--agent: ckpt: needs a path (ckpt:runs/x/agent.ckpt)");
    if (!std::filesystem::exists(checkpoint))
      throw BadInput("--agent: checkpoint '" + checkpoint + "' does not exist");
  }
  if (!args.checkpoint.empty()) {
    if (!checkpoint.empty() && checkpoint != args.checkpoint)
      throw BadInput("--checkpoint and --agent ckpt: name different files");
    checkpoint = args.checkpoint;
    if (!std::filesystem::exists(checkpoint))
      throw BadInput("--checkpoint: '" + checkpoint + "' does not exist");
  }
  check_agent_id(id, "--agent");
  return {id, checkpoint};
}

// --predicted-by: the same agent and Megatron-LM on a simulator of the same model.
struct Prediction {
  std::unique_ptr<Env> env, base;
  std::string name;
  std::vector<double> measured_gain, predicted_gain;
};

Prediction open_prediction(const EvalArgs& args, const ExperimentSpec& spec) {
  Prediction p;
  if (args.predicted_by.empty()) return p;
  ExperimentSpec sim_spec = load_experiment(args.predicted_by);
  if (sim_spec.model.num_blocks() != spec.model.num_blocks() ||
      sim_spec.cluster.world_size() != spec.cluster.world_size())
    throw BadInput("--predicted-by: " + args.predicted_by + " has " +
                   std::to_string(sim_spec.model.num_blocks()) + " blocks and " +
                   std::to_string(sim_spec.cluster.world_size()) + " ranks; " + args.config +
                   " has " + std::to_string(spec.model.num_blocks()) + " and " +
                   std::to_string(spec.cluster.world_size()));
  sim_spec.steps_per_episode = spec.steps_per_episode;
  p.env = make_env(sim_spec.env_id, sim_spec);
  p.base = make_env(sim_spec.env_id, sim_spec);
  p.name = sim_spec.name;
  return p;
}

// The agent and Megatron-LM on the prediction's simulator for `seed`, beside the measured pair.
void predict_seed(Prediction& p, const std::string& id, const std::string& checkpoint,
                  uint64_t seed, const EpisodeSummary& s, const EpisodeSummary& b) {
  std::unique_ptr<Agent> sa = make_agent(id, p.env->spec(), seed);
  if (!checkpoint.empty()) sa->load(checkpoint);
  const EpisodeSummary ps = run_episode(*p.env, *sa, seed, /*learn=*/false);
  std::unique_ptr<Agent> sm = make_agent("megatron", p.base->spec(), seed);
  const EpisodeSummary pb = run_episode(*p.base, *sm, seed, /*learn=*/false);
  p.measured_gain.push_back(b.throughput > 0 ? s.throughput / b.throughput - 1 : 0);
  p.predicted_gain.push_back(pb.throughput > 0 ? ps.throughput / pb.throughput - 1 : 0);
}

void print_prediction(const Prediction& p, std::ostream& out) {
  if (p.measured_gain.empty()) return;
  double m = 0, q = 0;
  for (size_t i = 0; i < p.measured_gain.size(); ++i)
    m += p.measured_gain[i], q += p.predicted_gain[i];
  m /= p.measured_gain.size(), q /= p.predicted_gain.size();
  // The measured gain's 95 % bootstrap interval over the seeds: the live run's own noise
  // (what the paired episodes still differ by from seed to seed), against which a realised
  // share is read. The prediction is the simulator's, without noise.
  const Interval ci = bootstrap_ci(p.measured_gain);
  out << "gain over megatron: measured " << fixed(100 * m, 1) << " % [" << fixed(100 * ci.low, 1)
      << ", " << fixed(100 * ci.high, 1) << "], predicted by " << p.name << " " << fixed(100 * q, 1)
      << " %";
  if (q > 0)
    out << "; realised " << fixed(100 * m / q, 0) << " % [" << fixed(100 * ci.low / q, 0) << ", "
        << fixed(100 * ci.high / q, 0) << "] of the predicted gain";
  out << "\n";
  if (p.measured_gain.size() > 1)
    out << "([..]: 95 % bootstrap interval of the mean over " << p.measured_gain.size()
        << " seeds)\n";
}

// eval's figure is an episode's mean: its agreement with itself is that of the mean step of
// Megatron-LM's plan over the first half of the episode against the second half.
void add_noise_pair(const EpisodeSummary& b, std::vector<std::pair<double, double>>& pairs) {
  if (b.same_plan_pairs.size() < 2) return;
  const size_t n = b.same_plan_pairs.size(), h = n / 2;
  double first = 0, second = 0;
  for (size_t i = 0; i < n; ++i) (i < h ? first : second) += b.same_plan_pairs[i].second;
  pairs.emplace_back(first / double(h), second / double(n - h));
}

}  // namespace

int run_eval(const EvalArgs& args, std::ostream& out, std::ostream& err) {
  ExperimentSpec spec = load_experiment(args.config);
  if (args.steps) spec.steps_per_episode = *args.steps;
  const auto [id, checkpoint] = eval_agent(args, spec);
  const std::vector<uint64_t> seeds = args.seeds.empty() ? spec.seeds : args.seeds;

  std::shared_ptr<TraceWriter> writer;
  std::string trace_path;
  if (!args.out.empty()) {
    std::filesystem::create_directories(args.out);
    trace_path = (std::filesystem::path(args.out) / "eval.h5").string();
    writer = std::make_shared<TraceWriter>(trace_path, make_trace_metadata(spec, kGitSha));
  }
  std::unique_ptr<Env> env = make_env(spec.env_id, spec);
  if (writer) env = std::make_unique<RecordTrace>(std::move(env), writer);
  std::unique_ptr<Env> base_env = make_env(spec.env_id, spec);
  Progress progress(err, Progress::stream_is_tty(stderr));
  Prediction prediction = open_prediction(args, spec);
  // On the live backend: Megatron-LM's plan held step after step, for the noise check.
  const bool live = env->spec().backend == "live";
  if (!live && (args.noise.allow_noisy || args.noise.noise_limit))
    throw BadInput("--allow-noisy and --noise-limit are for live configs; " + args.config +
                   " runs on the " + env->spec().backend + " backend");
  std::vector<std::pair<double, double>> noise_pairs;
  const NoiseWatch watch;

  Table t({"seed", "steps", "return", "tokens/s", "x megatron", "peak GiB", "x megatron", "J/token",
           "x megatron", "failed"});
  for (int c = 1; c < t.columns(); ++c) t.set_align(c, Align::kRight);
  std::string name, final_plan;
  double ratio_sum = 0;
  for (uint64_t seed : seeds) {
    std::unique_ptr<Agent> agent = make_agent(id, env->spec(), seed);
    if (!checkpoint.empty()) agent->load(checkpoint);
    if (writer) writer->set_agent(agent->name());
    name = agent->name();
    // The agent's and Megatron-LM's episodes step in turn: on a live run the machine's speed
    // drifts over seconds, and episodes run one after the other saw different stretches of
    // it (docs/live-fidelity.md, "Sim-to-real").
    std::unique_ptr<Agent> megatron = make_agent("megatron", base_env->spec(), seed);
    const auto [s, b] = run_interleaved_episodes(*env, *agent, *base_env, *megatron, seed);
    auto ratio = [](double x, double y) { return y > 0 ? fixed(x / y, 3) : std::string("n/a"); };
    t.add_row({std::to_string(seed), std::to_string(s.steps), fixed(s.total_reward, 3),
               fixed(s.throughput, 0), ratio(s.throughput, b.throughput),
               fixed(s.peak_memory_bytes / (1 << 30), 2),
               ratio(s.peak_memory_bytes, b.peak_memory_bytes), fixed(s.energy_per_token_j, 4),
               ratio(s.energy_per_token_j, b.energy_per_token_j), std::to_string(s.failed_steps)});
    ratio_sum += b.throughput > 0 ? s.throughput / b.throughput : 0;
    final_plan = s.final_plan;
    add_noise_pair(b, noise_pairs);
    if (prediction.env) predict_seed(prediction, id, checkpoint, seed, s, b);
    progress.line("seed " + std::to_string(seed) + ": " + fixed(s.throughput, 0) + " tokens/s");
  }
  env.reset();       // RecordTrace closes its episode
  base_env.reset();  // rank processes reaped: their CPU time is this command's, not others'
  if (writer) writer->close();
  out << "eval " << name << (checkpoint.empty() ? "" : " (" + checkpoint + ")") << " on "
      << spec.name << ": " << seeds.size() << " seed" << (seeds.size() == 1 ? "" : "s") << ", "
      << spec.steps_per_episode << " steps per episode, greedy\n\n"
      << t.render(TableFormat::kText)
      << "mean throughput x megatron: " << fixed(ratio_sum / static_cast<double>(seeds.size()), 3)
      << " (tokens/s include repartition; megatron = static Megatron-LM plan, same seed)\n"
      << "final plan (last seed): " << final_plan << "\n";
  print_prediction(prediction, out);
  if (writer) out << "trace: " << trace_path << "\n";
  if (!live) return 0;
  return report_noise(
      watch.judge("mean step of Megatron-LM's plan, first half of each episode against the second",
                  noise_pairs, noise_limits(args.noise)),
      /*json=*/false, out, err);
}

int run_bench_learn(const BenchLearnArgs& args, std::ostream& out, std::ostream& err) {
  ExperimentSpec spec = load_experiment(args.config);
  if (!args.agent.empty()) check_agent_id(args.agent, "--agent");
  LearnBenchOptions options;
  options.agent_id = args.agent;
  check_agent_id(args.oracle, "--oracle");
  options.oracle_id = args.oracle;
  options.envs = args.envs;
  options.max_steps = args.max_steps;
  options.budget_s = args.budget_s;
  options.threshold = args.threshold;
  options.stop_at_threshold = !args.keep_going;
  options.seed = args.seed;
  // By default a seed no training env or search of the learner plays (kHeldOutSeedBase).
  options.eval_seed = args.eval_seed
                          ? *args.eval_seed
                          : kHeldOutSeedBase + (spec.seeds.empty() ? 0 : spec.seeds.front());
  options.save_path = args.save;
  Progress progress(err, Progress::stream_is_tty(stderr));
  options.on_line = [&](const std::string& line) { progress.line(line); };
  LearnBenchResult r;
  try {
    r = bench_learning(spec, options);
  } catch (const std::invalid_argument& e) {  // an agent that cannot learn, a bad option
    throw BadInput(e.what());
  }
  out << (args.json ? learn_bench_to_json(r) : learn_bench_to_text(r));
  if (!args.save.empty()) out << "checkpoint: " << args.save << "\n";
  return 0;
}

}  // namespace shardgym::cli
