#include "experiments/bench_learning.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "agents/agent.h"
#include "analysis/table.h"
#include "agents/evaluate.h"
#include "agents/trainer.h"
#include "env/registry.h"
#include "env/vector_env.h"
#include "env/wrappers.h"
#include "experiments/train.h"

namespace shardgym {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

EpisodeSummary play(const ExperimentSpec& spec, const std::string& id, uint64_t seed) {
  std::unique_ptr<Env> env = make_env(spec.env_id, spec);
  std::unique_ptr<Agent> agent = make_agent(id, env->spec(), seed);
  return run_episode(*env, *agent, seed, /*learn=*/false);
}

}  // namespace

const LearnBenchPoint* LearnBenchResult::best() const {
  const LearnBenchPoint* b = nullptr;
  for (const LearnBenchPoint& p : points)
    if (!b || p.eval_return > b->eval_return) b = &p;
  return b;
}

LearnBenchResult bench_learning(const ExperimentSpec& spec, const LearnBenchOptions& options) {
  if (options.envs < 1) throw std::invalid_argument("bench learn: envs must be at least 1");
  if (!(options.threshold > 0)) throw std::invalid_argument("bench learn: threshold must be > 0");
  auto say = [&](const std::string& line) {
    if (options.on_line) options.on_line(line);
  };
  LearnBenchResult r;
  r.config_name = spec.name;
  r.envs = options.envs;
  r.threshold = options.threshold;

  // The threshold is a return: the dynamic oracle's reference is its return-optimal schedule
  // (its default minimises the episode's time, agents/oracle.h; the two part where tokens per
  // step change).
  const std::string oracle_id =
      options.oracle_id == "dynamic-oracle" ? "dynamic-oracle(objective=return)" : options.oracle_id;
  const EpisodeSummary oracle = play(spec, oracle_id, options.eval_seed);
  const EpisodeSummary megatron = play(spec, "megatron", options.eval_seed);
  const EpisodeSummary atp = play(spec, "atp", options.eval_seed);
  r.oracle_return = oracle.total_reward, r.oracle_throughput = oracle.throughput;
  r.megatron_return = megatron.total_reward, r.megatron_throughput = megatron.throughput;
  r.atp_return = atp.total_reward, r.atp_throughput = atp.throughput;
  if (!(r.oracle_return > 0))
    throw std::runtime_error("bench learn: the oracle's return is " + fixed(r.oracle_return, 3) +
                             "; a fraction of it is no target (use a normalised reward)");
  say("evaluation episode (seed " + std::to_string(options.eval_seed) + ", " +
      std::to_string(oracle.steps) + " steps): return " + oracle_id + " " +
      fixed(r.oracle_return, 2) +
      ", atp " + fixed(r.atp_return, 2) + ", megatron " + fixed(r.megatron_return, 2) +
      "; target " + fixed(options.threshold * r.oracle_return, 2));

  std::string id = options.agent_id;
  if (id.empty()) id = spec.agent.id;
  const CountSteps::Counter trained_steps = std::make_shared<std::atomic<int64_t>>(0);
  const CountSteps::Counter evaluated_steps = std::make_shared<std::atomic<int64_t>>(0);
  const EnvMaker sibling = make_sibling_envs(spec.env_id, spec);
  auto envs = std::make_unique<VectorEnv>(
      options.envs,
      [&](int) { return std::make_unique<CountSteps>(sibling(), trained_steps); },
      options.threads);
  std::unique_ptr<Agent> agent = make_agent(id, envs->spec(), options.seed);
  if (!agent->learns()) {
    if (!options.agent_id.empty())
      throw std::invalid_argument("bench learn: agent '" + id + "' does not learn");
    id = "ppo";
    agent = make_agent(id, envs->spec(), options.seed);
  }
  r.agent = agent->name();
  CountSteps eval_env(make_env(spec.env_id, spec), evaluated_steps);

  const Clock::time_point t0 = Clock::now();
  double eval_s = 0;
  // The best evaluated policy is kept (the usual checkpoint selection; compare then evaluates
  // it on other seeds), across restarts (agents/trainer.h).
  Trainer trainer(eval_env, options.eval_seed, options.save_path);
  trainer.say = say;
  const bool trained = trainer.run(*agent, *envs, options.max_steps, [&](const TrainerUpdate& u) {
    const TrainProgress& p = u.progress;
    eval_s += u.evaluation.wall_s;
    LearnBenchPoint pt;
    pt.update = p.update;
    pt.training_steps = p.env_steps;
    pt.search_steps = std::max<int64_t>(0, trained_steps->load() - p.env_steps);
    pt.eval_steps = evaluated_steps->load();
    pt.env_steps = trained_steps->load() + pt.eval_steps;
    pt.wall_s = seconds_since(t0);
    pt.eval_return = u.evaluation.total_reward;
    pt.eval_throughput = u.evaluation.throughput;
    pt.train_return = p.mean_episode_return;
    r.points.push_back(pt);
    const bool reached = pt.eval_return >= options.threshold * r.oracle_return;
    if (reached && !r.reached) {
      r.reached = true;
      r.time_to_threshold_s = pt.wall_s;
      r.steps_to_threshold = pt.env_steps;
    }
    say("update " + std::to_string(pt.update) + "  env steps " + std::to_string(pt.env_steps) +
        (pt.search_steps > 0 ? " (search " + std::to_string(pt.search_steps) + ")" : "") + "  " +
        fixed(pt.wall_s, 1) + " s  eval return " + fixed(pt.eval_return, 2) + " (" +
        fixed(pt.eval_return / r.oracle_return, 3) + " of oracle)  train return " +
        (std::isnan(pt.train_return) ? std::string("-") : fixed(pt.train_return, 2)));
    if (reached && options.stop_at_threshold) return false;
    return pt.wall_s < options.budget_s;
  });
  if (!trained)
    throw std::invalid_argument("bench learn: agent '" + id +
                                "' has no vectorised training (ppo has)");
  r.wall_s = seconds_since(t0);
  r.eval_wall_s = eval_s;
  r.restart_wall_s = trainer.restart_wall_s();
  return r;
}

std::string learn_bench_to_text(const LearnBenchResult& r) {
  std::ostringstream os;
  os << "bench learn: " << r.agent << " on " << r.config_name << ", " << r.envs
     << " training envs\n";
  os << "evaluation return: oracle " << fixed(r.oracle_return, 3) << ", atp "
     << fixed(r.atp_return, 3) << ", megatron " << fixed(r.megatron_return, 3) << "\n";
  os << "throughput / megatron: oracle " << fixed(r.oracle_throughput / r.megatron_throughput, 3)
     << ", atp " << fixed(r.atp_throughput / r.megatron_throughput, 3);
  if (const LearnBenchPoint* b = r.best())
    os << ", " << r.agent << " (best evaluation) "
       << fixed(b->eval_throughput / r.megatron_throughput, 3);
  os << "\n";
  if (r.reached) {
    os << "reached " << fixed(r.threshold * 100, 0) << "% of the oracle's return after "
       << fixed(r.time_to_threshold_s, 1) << " s wall, " << r.steps_to_threshold
       << " env steps in all";
    for (const LearnBenchPoint& p : r.points)
      if (p.env_steps == r.steps_to_threshold) {
        os << " (" << p.training_steps << " training, " << p.search_steps
           << " in the learner's searches, " << p.eval_steps << " evaluating)";
        break;
      }
    os << "\n";
  } else {
    const LearnBenchPoint* b = r.best();
    os << "did not reach " << fixed(r.threshold * 100, 0) << "% of the oracle's return in "
       << fixed(r.wall_s, 1) << " s; best evaluation "
       << (b ? fixed(b->eval_return / r.oracle_return, 3) : std::string("-")) << " of oracle\n";
  }
  if (!r.restart_wall_s.empty()) {
    os << "restarts on stall: " << r.restart_wall_s.size() << " (at";
    for (size_t i = 0; i < r.restart_wall_s.size(); ++i)
      os << (i ? ", " : " ") << fixed(r.restart_wall_s[i], 1);
    os << " s)\n";
  }
  os << "wall " << fixed(r.wall_s, 1) << " s, of which evaluation " << fixed(r.eval_wall_s, 1)
     << " s\n";
  return os.str();
}

std::string learn_bench_to_json(const LearnBenchResult& r) {
  std::ostringstream os;
  os.precision(10);
  os << "{\n  \"agent\": \"" << r.agent << "\",\n  \"config\": \"" << r.config_name
     << "\",\n  \"envs\": " << r.envs << ",\n  \"oracle_return\": " << r.oracle_return
     << ",\n  \"atp_return\": " << r.atp_return << ",\n  \"megatron_return\": "
     << r.megatron_return << ",\n  \"threshold\": " << r.threshold
     << ",\n  \"reached\": " << (r.reached ? "true" : "false")
     << ",\n  \"time_to_threshold_s\": " << (r.reached ? r.time_to_threshold_s : -1)
     << ",\n  \"steps_to_threshold\": " << (r.reached ? r.steps_to_threshold : -1)
     << ",\n  \"wall_s\": " << r.wall_s << ",\n  \"eval_wall_s\": " << r.eval_wall_s
     << ",\n  \"restarts\": " << r.restart_wall_s.size() << ",\n  \"restart_wall_s\": [";
  for (size_t i = 0; i < r.restart_wall_s.size(); ++i)
    os << (i ? ", " : "") << r.restart_wall_s[i];
  os << "],\n  \"points\": [";
  for (size_t i = 0; i < r.points.size(); ++i) {
    const LearnBenchPoint& p = r.points[i];
    os << (i ? "," : "") << "\n    {\"update\": " << p.update << ", \"env_steps\": " << p.env_steps
       << ", \"training_steps\": " << p.training_steps << ", \"search_steps\": " << p.search_steps
       << ", \"eval_steps\": " << p.eval_steps << ", \"wall_s\": " << p.wall_s << ", \"eval_return\": " << p.eval_return
       << ", \"eval_throughput\": " << p.eval_throughput << "}";
  }
  os << "\n  ]\n}\n";
  return os.str();
}

}  // namespace shardgym
