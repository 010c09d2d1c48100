// `shardgym compare` (agents against static Megatron-LM over seeds, analysis/compare.h table)
// and `shardgym bench live` (runtime/live/bench/bench_live.h, LibTorch builds only).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include <filesystem>
#include <map>
#include <memory>

#include "agents/evaluate.h"
#include "analysis/table.h"
#include "datasets/trace_writer.h"
#include "env/wrappers.h"
#include "analysis/compare.h"
#include "experiments/cli/commands.h"
#include "experiments/compare_traces.h"
#include "experiments/config.h"
#include "experiments/progress.h"
#if SHARDGYM_HAVE_LIVE
#include "runtime/live/bench/bench_live.h"
#include "runtime/live/bench/bench_pipeline.h"
#endif

namespace shardgym::cli {

std::vector<std::string> split_agent_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;  // agent ids may hold commas inside parentheses: "ppo(lr=3e-4,clip=0.2)"
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (!item.empty()) out.push_back(item);
  return out;
}

void check_agent_id(const std::string& id, const char* option) {
  std::string name;
  try {
    name = ParsedId::parse(id).name;
  } catch (const std::invalid_argument& e) {
    throw BadInput(std::string(option) + ": " + e.what());
  }
  const std::vector<std::string> known = registered_agent_names();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    const std::string hint = closest_name(name, known);
    throw BadInput(std::string(option) + ": unknown agent '" + name + "'" +
                   (hint.empty() ? std::string() : "; did you mean '" + hint + "'?"));
  }
  try {
    shardgym::check_agent_id(id);  // its parameters, before any episode runs
  } catch (const std::invalid_argument& e) {
    throw BadInput(std::string(option) + ": " + e.what());
  }
}

// The table, the failures, the agents not run and the adaptivity headroom of `result`.
void print_comparison(const CompareResult& result, const std::string& header,
                      const CompareArgs& args, std::ostream& out) {
  std::vector<AgentRuns> runs;
  for (const AgentComparison& c : result.agents) {
    if (c.not_run.empty())
      runs.push_back({c.agent, c.throughput_ratio, c.memory_ratio, c.energy_ratio});
  }
  ComparisonOptions table;
  table.statistic = args.statistic == "mean"     ? Statistic::kMean
                    : args.statistic == "median" ? Statistic::kMedian
                                                 : Statistic::kIqm;
  table.bootstrap.seed = args.bootstrap_seed;
  table.baseline = result.baseline;
  double base_throughput = 0;
  for (const EpisodeSummary& s : result.baseline_episodes) base_throughput += s.throughput;
  out << header << "; baseline " << result.baseline << " at "
      << fixed(base_throughput / static_cast<double>(result.baseline_episodes.size()), 0)
      << " tokens/s (mean over seeds)\n\n"
      << format_comparison(runs, args.markdown ? TableFormat::kMarkdown : TableFormat::kText,
                           table);
  // Episodes ended by a failed step (error or out of memory) count only the steps before the
  // failure in the ratios above: say which, so a crashed plan is not read as a fast one.
  auto failures = [&](const std::string& id, const std::vector<EpisodeSummary>& episodes) {
    int failed = 0;
    for (const EpisodeSummary& e : episodes) failed += e.failed_steps > 0;
    if (failed > 0)
      out << "ended by a failed step (error or out of memory): " << id << " in " << failed
          << " of " << episodes.size() << " runs; its ratios cover the steps before\n";
  };
  failures(result.baseline, result.baseline_episodes);
  for (const AgentComparison& c : result.agents)
    if (c.agent != result.baseline) failures(c.agent, c.episodes);
  for (const AgentComparison& c : result.agents)
    if (!c.not_run.empty()) out << "not run: " << c.agent << ": " << c.not_run << "\n";
  // Adaptivity headroom: what the best possible adaptation gains over the best fixed plan.
  const AgentComparison* hindsight = nullptr;
  const AgentComparison* dynamic = nullptr;
  for (const AgentComparison& c : result.agents) {
    if (c.agent == "hindsight-static" && c.not_run.empty()) hindsight = &c;
    if (c.agent == "dynamic-oracle" && c.not_run.empty()) dynamic = &c;
  }
  std::vector<double> headroom;
  for (size_t i = 0; hindsight && dynamic && i < hindsight->episodes.size(); ++i)
    if (hindsight->episodes[i].throughput > 0 && dynamic->episodes[i].throughput > 0)
      headroom.push_back(dynamic->episodes[i].throughput / hindsight->episodes[i].throughput);
  if (hindsight && dynamic && headroom.empty())
    out << "adaptivity headroom: not computed, every reference episode failed at its first "
           "step\n";
  if (!headroom.empty()) {
    const auto [lo, hi] = std::minmax_element(headroom.begin(), headroom.end());
    double mean = 0;
    for (double h : headroom) mean += h / static_cast<double>(headroom.size());
    out << "adaptivity headroom (dynamic-oracle / hindsight-static throughput, per seed): mean "
        << fixed(mean, 3) << ", range " << fixed(*lo, 3) << "-" << fixed(*hi, 3)
        << "; the best static plan is hindsight-static\n";
  }
}

int run_compare(const CompareArgs& args, std::ostream& out, std::ostream& err) {
  if (!args.from_traces.empty()) {
    const CompareResult result = compare_from_traces(args.from_traces, "megatron");
    print_comparison(result,
                     "rebuilt from the traces in " + args.from_traces + ": " +
                         std::to_string(result.agents.size()) + " agents, " +
                         std::to_string(result.seeds.size()) + " seeds",
                     args, out);
    return 0;
  }
  if (args.config.empty()) throw BadInput("compare: give a config (or --from-traces DIR)");
  ExperimentSpec spec = load_experiment(args.config);
  if (args.steps) spec.steps_per_episode = *args.steps;
  if (args.data_shares) {
    const int n = *args.data_shares;
    if (n > 0 && spec.cluster.world_size() % n != 0)
      throw BadInput("--data-shares " + std::to_string(n) + ": does not split the world of " +
                     std::to_string(spec.cluster.world_size()) + " ranks");
    spec.data_share_groups = n;
  }
  if (args.uneven_heads) spec.catalog.uneven_heads_max_degree = *args.uneven_heads;
  std::vector<std::string> agents = split_agent_list(args.agents);
  if (agents.empty()) agents = {"atp", spec.agent.id};
  // The references every comparison is read against: the best static plan in hindsight and
  // the dynamic oracle (their ratio is the scenario's adaptivity headroom). On a backend that
  // cannot estimate() they are reported as not run.
  for (const char* reference : {"hindsight-static", "dynamic-oracle"}) {
    if (!args.no_references && std::find(agents.begin(), agents.end(), reference) == agents.end())
      agents.push_back(reference);
  }
  for (const std::string& id : agents) check_agent_id(id, "--agents");
  std::vector<uint64_t> seeds = args.seeds.empty() ? spec.seeds : args.seeds;
  // A confidence interval over fewer than 5 runs says little: by default at least 5 seeds.
  for (uint64_t s = 0; args.seeds.empty() && seeds.size() < 5; ++s)
    if (std::find(seeds.begin(), seeds.end(), s) == seeds.end()) seeds.push_back(s);

  CompareOptions options;
  options.train_episodes = args.train_episodes;
  for (const std::string& entry : args.checkpoints) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      throw BadInput("--checkpoint: expected AGENT=PATH, got '" + entry + "'");
    }
    options.checkpoints[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  Progress progress(err, Progress::stream_is_tty(stderr));
  options.on_episode = [&](const EpisodeSummary& s) {
    progress.line(s.agent + " seed " + std::to_string(s.seed) + ": " + std::to_string(s.steps) +
                  " steps, " + fixed(s.throughput, 0) + " tokens/s" +
                  (s.failed_steps ? " (ended by a failed step)" : ""));
  };
  // Traces: one file per agent (the baseline included), one episode per seed.
  std::map<std::string, std::shared_ptr<TraceWriter>> writers;
  if (!args.out.empty()) {
    std::filesystem::create_directories(args.out);
    options.wrap_env = [&](std::unique_ptr<Env> env, const std::string& id) -> std::unique_ptr<Env> {
      std::shared_ptr<TraceWriter>& w = writers[id];
      if (!w) {
        std::string file;
        for (char c : id) file += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
        w = std::make_shared<TraceWriter>((std::filesystem::path(args.out) / (file + ".h5")).string(),
                                          make_trace_metadata(spec, kGitSha));
        w->set_agent(id);
      }
      return std::make_unique<RecordTrace>(std::move(env), w);
    };
  }
  const CompareResult result = compare(spec, agents, seeds, options);
  for (auto& [id, w] : writers) w->close();

  std::ostringstream header;
  header << spec.name << ": " << spec.model.layers << "-layer " << spec.model.family() << " on "
         << spec.cluster.world_size() << " GPUs, " << seeds.size() << " seed"
         << (seeds.size() == 1 ? "" : "s") << ", " << spec.steps_per_episode
         << " steps per episode"
         << (spec.data_share_groups > 0
                 ? ", data shares over " + std::to_string(spec.data_share_groups) + " groups"
                 : std::string());
  print_comparison(result, header.str(), args, out);
  if (!writers.empty()) out << "traces: " << args.out << "/<agent>.h5\n";
  return 0;
}

int run_bench_live(const BenchLiveArgs& args, std::ostream& out, std::ostream& err) {
#if SHARDGYM_HAVE_LIVE
  live::BenchLiveOptions options;
  options.threads = args.threads;
  options.iters = args.iters;
  options.warmup = args.warmup;
  options.run_python = !args.no_python;
  options.device = args.device;
  options.python = args.python;
  const NoiseWatch watch;
  const live::BenchLiveResult r = live::bench_live(options);
  const NoiseReport noise = watch.judge("C++ step wall clock, back to back",
                                        consecutive_pairs(r.cpp_step_s), noise_limits(args.noise));
  out << (args.json ? json_with_noise(live::bench_live_to_json(r), noise)
                    : live::bench_live_to_text(r));
  return report_noise(noise, args.json, out, err);
#else
  (void)args;
  (void)out;
  (void)err;
  throw std::runtime_error("bench live needs the LibTorch build (cmake -DSHARDGYM_WITH_TORCH=ON)");
#endif
}

int run_bench_pipeline(const BenchPipelineArgs& args, std::ostream& out, std::ostream& err) {
#if SHARDGYM_HAVE_LIVE
  live::BenchPipelineOptions o;
  o.ranks = args.ranks, o.iters = args.iters, o.warmup = args.warmup;
  o.micro_batches = args.micro_batches;
  o.run_python = !args.no_python;
  o.python = args.python;
  const NoiseWatch watch;
  live::BenchPipelineResult r;
  try {
    r = live::bench_pipeline(o);
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  // The live run's agreement with itself: each row's timed steps, back to back.
  std::vector<std::pair<double, double>> pairs;
  for (const live::BenchPipelineRow& w : r.rows)
    for (const auto& p : consecutive_pairs(w.steps)) pairs.push_back(p);
  const NoiseReport noise = watch.judge("pipelined step wall clock, back to back", pairs,
                                        noise_limits(args.noise));
  out << (args.json ? json_with_noise(live::bench_pipeline_to_json(r), noise)
                    : live::bench_pipeline_to_text(r));
  return report_noise(noise, args.json, out, err);
#else
  (void)args;
  (void)out;
  (void)err;
  throw std::runtime_error(
      "bench pipeline needs the LibTorch build (cmake -DSHARDGYM_WITH_TORCH=ON)");
#endif
}

}  // namespace shardgym::cli
