#include "agents/evaluate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "env/registry.h"

namespace shardgym {

EpisodeSummary run_episode(Env& env, Agent& agent, uint64_t seed, bool learn,
                           const EpisodeHooks& hooks) {
  const auto t0 = std::chrono::steady_clock::now();
  EpisodeSummary s;
  s.agent = agent.name();
  s.seed = seed;
  ResetResult reset = env.reset(seed);
  if (hooks.on_reset) hooks.on_reset(reset);
  agent.begin_episode(env);  // after reset: static agents read the run's state there
  agent.set_training(learn);
  Observation obs = std::move(reset.obs);
  while (true) {
    const Action action = agent.act(obs, env.action_mask());
    StepResult r = env.step(action);
    ++s.steps;
    s.total_reward += r.reward;
    const Measurement& m = r.info.measurement;
    // Out of memory counts as a failure even where the run still reports figures for it.
    const bool failed = !r.info.error.empty() || !m.ok || m.oom;
    if (!failed) {
      s.tokens += m.tokens;
      s.time_s += m.step_latency_s + m.repartition_s;
      s.repartition_s += m.repartition_s;
      s.energy_j += m.energy_j;
      for (double p : m.peak_memory_bytes) s.peak_memory_bytes = std::max(s.peak_memory_bytes, p);
    } else {
      ++s.failed_steps;
      if (!m.oom && s.error.empty())
        s.error = !r.info.error.empty() ? r.info.error : m.error.empty() ? "failed step" : m.error;
    }
    s.final_plan = r.info.plan.to_string();
    // Every agent observes (online search acts on rewards); learners also update.
    agent.observe({obs, action, r.reward, r.obs, r.terminated, r.truncated || failed, failed});
    if (learn) agent.update();
    if (hooks.on_step) {
      s.throughput = s.time_s > 0 ? s.tokens / s.time_s : 0;
      hooks.on_step(r, s);
    }
    obs = std::move(r.obs);
    if (r.terminated || r.truncated || failed) break;
  }
  s.throughput = s.time_s > 0 ? s.tokens / s.time_s : 0;
  s.energy_per_token_j = s.tokens > 0 ? s.energy_j / s.tokens : 0;
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

double AgentComparison::mean_throughput_ratio() const {
  if (throughput_ratio.empty()) return 0;
  double sum = 0;
  for (double r : throughput_ratio) sum += r;
  return sum / static_cast<double>(throughput_ratio.size());
}

namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

// Training seeds never coincide with evaluation seeds (those are small integers).
constexpr uint64_t kTrainSeedBase = 1'000'003;

EpisodeSummary evaluate_one(const ExperimentSpec& spec, const std::string& id, uint64_t seed,
                            const CompareOptions& options) {
  std::unique_ptr<Env> env = make_env(spec.env_id, spec);
  std::unique_ptr<Agent> agent = make_agent(id, env->spec(), seed);
  auto ckpt = options.checkpoints.find(id);
  if (ckpt != options.checkpoints.end()) agent->load(ckpt->second);
  if (agent->learns())
    for (int e = 0; e < options.train_episodes; ++e)
      run_episode(*env, *agent, kTrainSeedBase + seed * 7919 + e, /*learn=*/true);
  if (options.wrap_env) env = options.wrap_env(std::move(env), id);
  EpisodeSummary s = run_episode(*env, *agent, seed, /*learn=*/false);
  s.agent = id;
  if (options.on_episode) options.on_episode(s);
  return s;
}

}  // namespace

CompareResult compare(const ExperimentSpec& spec, const std::vector<std::string>& agents,
                      const std::vector<uint64_t>& seeds, const CompareOptions& options) {
  if (seeds.empty()) throw std::invalid_argument("compare: no seeds");
  CompareResult result;
  result.baseline = options.baseline;
  result.seeds = seeds;
  for (uint64_t seed : seeds)
    result.baseline_episodes.push_back(evaluate_one(spec, options.baseline, seed, options));
  for (const std::string& id : agents) {
    AgentComparison c;
    c.agent = id;
    for (size_t i = 0; i < seeds.size(); ++i) {
      const EpisodeSummary& base = result.baseline_episodes[i];
      EpisodeSummary s;
      try {
        s = id == options.baseline ? base : evaluate_one(spec, id, seeds[i], options);
      } catch (const std::runtime_error& e) {
        // One agent that cannot run here (an oracle on a live run) must not take the
        // whole table down: it is reported as not run, with the reason.
        c.not_run = e.what();
        c.episodes.clear();
        c.throughput_ratio.clear();
        c.memory_ratio.clear();
        c.energy_ratio.clear();
        break;
      }
      c.throughput_ratio.push_back(ratio(s.throughput, base.throughput));
      c.memory_ratio.push_back(ratio(s.peak_memory_bytes, base.peak_memory_bytes));
      c.energy_ratio.push_back(ratio(s.energy_per_token_j, base.energy_per_token_j));
      c.episodes.push_back(std::move(s));
    }
    result.agents.push_back(std::move(c));
  }
  return result;
}

}  // namespace shardgym
