#include "agents/evaluate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "env/registry.h"

namespace shardgym {

EpisodeRun::EpisodeRun(Env& env, Agent& agent, uint64_t seed, bool learn,
                       const EpisodeHooks& hooks)
    : env_(env), agent_(agent), learn_(learn), hooks_(hooks), t0_(std::chrono::steady_clock::now()) {
  s_.agent = agent.name();
  s_.seed = seed;
  ResetResult reset = env.reset(seed);
  if (hooks_.on_reset) hooks_.on_reset(reset);
  agent.begin_episode(env);  // after reset: static agents read the run's state there
  agent.set_training(learn);
  obs_ = std::move(reset.obs);
  plan_ = std::move(reset.info.plan_indices);
}

void EpisodeRun::step() {
  if (done_) return;
  const Action action = agent_.act(obs_, env_.action_mask(), plan_);
  StepResult r = env_.step(action);
  ++s_.steps;
  s_.total_reward += r.reward;
  const Measurement& m = r.info.measurement;
  // Out of memory counts as a failure even where the run still reports figures for it.
  const bool failed = !r.info.error.empty() || !m.ok || m.oom;
  if (!failed) {
    s_.tokens += m.tokens;
    s_.time_s += m.step_latency_s + m.repartition_s;
    s_.repartition_s += m.repartition_s;
    s_.energy_j += m.energy_j;
    for (double p : m.peak_memory_bytes) s_.peak_memory_bytes = std::max(s_.peak_memory_bytes, p);
  } else {
    ++s_.failed_steps;
    if (!m.oom && s_.error.empty())
      s_.error = !r.info.error.empty() ? r.info.error : m.error.empty() ? "failed step" : m.error;
  }
  std::string plan = r.info.plan.to_string();
  if (!failed && last_ok_latency_s_ >= 0 && plan == s_.final_plan)
    s_.same_plan_pairs.emplace_back(last_ok_latency_s_, m.step_latency_s);
  last_ok_latency_s_ = failed ? -1 : m.step_latency_s;
  s_.final_plan = std::move(plan);
  // Every agent observes (online search acts on rewards); learners also update.
  agent_.observe({obs_, action, r.reward, r.obs, r.terminated, r.truncated || failed, failed});
  if (learn_) agent_.update();
  if (hooks_.on_step) {
    s_.throughput = s_.time_s > 0 ? s_.tokens / s_.time_s : 0;
    hooks_.on_step(r, s_);
  }
  obs_ = std::move(r.obs);
  plan_ = std::move(r.info.plan_indices);
  if (r.terminated || r.truncated || failed) {
    done_ = true;
    s_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
}

EpisodeSummary EpisodeRun::summary() const {
  EpisodeSummary s = s_;
  s.throughput = s.time_s > 0 ? s.tokens / s.time_s : 0;
  s.energy_per_token_j = s.tokens > 0 ? s.energy_j / s.tokens : 0;
  return s;
}

EpisodeSummary run_episode(Env& env, Agent& agent, uint64_t seed, bool learn,
                           const EpisodeHooks& hooks) {
  EpisodeRun run(env, agent, seed, learn, hooks);
  while (!run.done()) run.step();
  return run.summary();
}

std::pair<EpisodeSummary, EpisodeSummary> run_interleaved_episodes(Env& env_a, Agent& agent_a,
                                                                   Env& env_b, Agent& agent_b,
                                                                   uint64_t seed) {
  EpisodeRun a(env_a, agent_a, seed, /*learn=*/false);
  EpisodeRun b(env_b, agent_b, seed, /*learn=*/false);
  // a b, b a, a b, ...: neither episode always goes first after the other's step.
  for (int k = 0; !a.done() || !b.done(); ++k) {
    EpisodeRun& first = k % 2 == 0 ? a : b;
    EpisodeRun& second = k % 2 == 0 ? b : a;
    first.step();
    second.step();
  }
  return {a.summary(), b.summary()};
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

// Seed `seed` evaluates instance `seed` of a task with draws (core/scenario_draw.h); training
// episodes run on instances of their own seeds, never an evaluated one.
EpisodeSummary evaluate_one(const ExperimentSpec& spec, const std::string& id, uint64_t seed,
                            const CompareOptions& options) {
  std::unique_ptr<Env> env = make_env(spec.env_id, with_instance(spec, seed));
  std::unique_ptr<Agent> agent = make_agent(id, env->spec(), seed);
  auto ckpt = options.checkpoints.find(id);
  if (ckpt != options.checkpoints.end()) agent->load(ckpt->second);
  if (agent->learns())
    for (int e = 0; e < options.train_episodes; ++e) {
      const uint64_t train_seed = kTrainSeedBase + seed * 7919 + e;
      if (spec.scenario.draws.empty()) {
        run_episode(*env, *agent, train_seed, /*learn=*/true);
      } else {
        std::unique_ptr<Env> train = make_env(spec.env_id, with_instance(spec, train_seed));
        run_episode(*train, *agent, train_seed, /*learn=*/true);
      }
    }
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
