#include "experiments/train.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "agents/trainer.h"
#include "analysis/table.h"
#include "datasets/trace_writer.h"
#include "env/registry.h"
#include "env/vector_env.h"
#include "env/wrappers.h"
#include "experiments/config.h"
#include "runtime/core/training_run.h"

namespace shardgym {
namespace fs = std::filesystem;

namespace {

// Seconds per token of the static Megatron plan under the conditions of the step just taken:
// NormalizeReward's baseline when the reward is normalised, else the run's estimate.
double megatron_latency_per_token(const StepResult& r, const TrainingRun& run,
                                  const Plan& megatron) {
  auto it = r.info.scalars.find("baseline_latency_per_token_s");
  if (it != r.info.scalars.end() && it->second > 0) return it->second;
  std::optional<Measurement> est = run.estimate(megatron);
  return est && est->ok && est->tokens > 0 ? est->step_latency_s / est->tokens : 0.0;
}

// DIR/learning.csv: one row per update of vectorised training, written and flushed as it
// comes (a killed run keeps its rows). Columns (docs/python.md, "Report"): update,
// training_steps (rollouts), env_steps (every step the learner caused: rollouts, its own
// searches and the greedy evaluations that pick the policy), wall_s (since training began,
// evaluations included), eval_return (greedy, held-out seed), train_return (mean of the
// training episodes ended since the previous row; empty when none).
class LearningLog {
 public:
  explicit LearningLog(const std::string& path) : f_(path, std::ios::trunc) {
    if (!f_) throw std::runtime_error("cannot write " + path);
    f_ << "update,training_steps,env_steps,wall_s,eval_return,train_return\n" << std::flush;
  }
  void row(int update, int64_t training_steps, int64_t env_steps, double wall_s, double eval_return,
           double train_return) {
    char line[256];
    std::snprintf(line, sizeof line, "%d,%lld,%lld,%.3f,%.9g,", update,
                  static_cast<long long>(training_steps), static_cast<long long>(env_steps), wall_s,
                  eval_return);
    f_ << line;
    if (std::isfinite(train_return)) {
      std::snprintf(line, sizeof line, "%.9g", train_return);
      f_ << line;
    }
    f_ << "\n" << std::flush;
  }

 private:
  std::ofstream f_;
};

}  // namespace

namespace {

struct OutputPaths {
  std::string trace, checkpoint, learning;
};

// `--out` and the files written in it are not followed when they are symbolic links: a
// link would make train overwrite whatever it points to (docs/robustness.md).
OutputPaths prepare_out_dir(const std::string& out_dir) {
  if (fs::is_symlink(out_dir))
    throw std::invalid_argument("--out '" + out_dir +
                                "' is a symbolic link; give the folder itself");
  fs::create_directories(out_dir);
  OutputPaths paths{(fs::path(out_dir) / "trace.h5").string(),
                    (fs::path(out_dir) / "agent.ckpt").string(),
                    (fs::path(out_dir) / "learning.csv").string()};
  for (const std::string& file : {paths.trace, paths.checkpoint, paths.learning})
    if (fs::is_symlink(file))
      throw std::invalid_argument("'" + file +
                                  "' is a symbolic link; train does not write through links");
  return paths;
}

std::string training_line(const std::string& agent, size_t envs, const TrainProgress& p,
                          int64_t train_steps, double eval_return, double best_return) {
  return "training " + agent + " on " + std::to_string(envs) +
         " envs: " + std::to_string(p.env_steps) + "/" + std::to_string(train_steps) + " steps, " +
         fixed(p.wall_s, 0) + " s, mean episode return " +
         (std::isnan(p.mean_episode_return) ? std::string("-") : fixed(p.mean_episode_return, 2)) +
         ", greedy " + fixed(eval_return, 2) + " (best " + fixed(best_return, 2) + ")";
}

// Learners with vectorised training (PPO) first train for agent.train_steps env steps on
// `train_envs` copies of the env; the recorded episodes then continue from there. Returns
// whether the agent trained so (the episodes then evaluate the policy).
bool train_vectorised(const ExperimentSpec& spec, const TrainOptions& options, uint64_t seed,
                      Agent& agent, const OutputPaths& paths, TrainResult& result) {
  Progress* progress = options.progress;
  // A task with drawn events (core/scenario_draw.h) trains on other instances than the
  // recorded episodes play (the config's `instance`): env k on instance + 1,000,003 + k.
  const bool drawn = !spec.scenario.draws.empty();
  const uint64_t instance = spec.scenario.instance;
  // Every env step is counted where it happens: rollouts, the learner's own searches and
  // the greedy evaluations below (they pick the policy kept) — learning.csv's env_steps.
  const CountSteps::Counter trained_steps = std::make_shared<std::atomic<int64_t>>(0);
  const CountSteps::Counter evaluated_steps = std::make_shared<std::atomic<int64_t>>(0);
  // Without draws the envs are siblings of one spec and share what their backend can.
  const EnvMaker sibling = drawn ? EnvMaker{} : make_sibling_envs(spec.env_id, spec);
  VectorEnv envs(options.train_envs, [&](int k) {
    return std::make_unique<CountSteps>(
        drawn ? make_env(spec.env_id, with_instance(spec, instance + 1'000'003 + k)) : sibling(),
        trained_steps);
  });
  // After every update one greedy episode on a held-out seed; the best policy is kept (PPO
  // does not improve monotonically: the last update is not always the best one) in agent.ckpt
  // as soon as it is picked, so a kill at any later moment leaves it there (agents/trainer.h).
  std::unique_ptr<Env> eval_env = std::make_unique<CountSteps>(
      make_env(spec.env_id, drawn ? with_instance(spec, instance + 2'000'003) : spec),
      evaluated_steps);
  LearningLog log(paths.learning);
  const auto t0 = std::chrono::steady_clock::now();
  Trainer trainer(*eval_env, kHeldOutSeedBase + seed, paths.checkpoint);
  if (progress) trainer.say = [progress](const std::string& line) { progress->line(line); };
  int reported = 0;
  const bool vectorised =
      trainer.run(agent, envs, spec.agent.train_steps, [&](const TrainerUpdate& u) {
        const TrainProgress& p = u.progress;
        const double eval_return = u.evaluation.total_reward;
        result.training.push_back(p);
        log.row(p.update, p.env_steps, trained_steps->load() + evaluated_steps->load(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                eval_return, p.mean_episode_return);
        if (u.best) result.best_update = p.update;
        if (progress) {
          const std::string text = training_line(result.agent, envs.size(), p,
                                                 spec.agent.train_steps, eval_return,
                                                 u.best_return);
          // A permanent line every 10 s or so, the rest on a terminal only.
          if (p.wall_s >= 10.0 * (reported + 1)) {
            progress->line(text);
            reported = static_cast<int>(p.wall_s / 10.0);
          } else {
            progress->update(text);
          }
        }
        return true;
      });
  if (!vectorised && progress) {
    progress->line("agent " + result.agent +
                   " has no vectorised training; agent.train_steps is ignored and it learns "
                   "during the episodes only");
  }
  return vectorised;
}

// A reset whose plan does not fit memory is a config problem, not a runtime failure: reported
// like the loader would, at the key's line; without the key, the default plan's model is what
// does not fit.
void refuse_oom_initial_plan(const ExperimentSpec& spec, const ResetResult& reset) {
  if (!reset.info.measurement.oom) return;
  const bool given = spec.key_lines.count("initial_plan") > 0;
  const auto line = spec.key_lines.find(given ? "initial_plan" : "model");
  throw ConfigError(spec.source_path, "initial_plan",
                    line != spec.key_lines.end() ? line->second : 0,
                    "plan '" + reset.info.plan.to_string() + "'" +
                        (given ? "" : " (the default initial plan, megatron)") +
                        " does not fit device memory (check it with `shardgym cost`)");
}

// Recorded episode k, with Megatron-LM's throughput under the same conditions beside it.
EpisodeStats play_episode(const ExperimentSpec& spec, Env& env, Agent& agent, const Plan& megatron,
                          int k, uint64_t seed, bool learn, Progress* progress) {
  EpisodeStats stats;
  stats.episode = k;
  stats.seed = seed + static_cast<uint64_t>(k);
  double megatron_tokens = 0, megatron_time_s = 0;
  const std::string head = "episode " + std::to_string(k + 1) + "/" + std::to_string(spec.episodes);
  EpisodeHooks hooks;
  hooks.on_reset = [&](const ResetResult& reset) { refuse_oom_initial_plan(spec, reset); };
  hooks.on_step = [&](const StepResult& r, const EpisodeSummary& so_far) {
    const Measurement& m = r.info.measurement;
    if (r.info.error.empty() && m.ok && !m.oom) {
      const double lpt = megatron_latency_per_token(r, env.run(), megatron);
      if (lpt > 0) megatron_tokens += m.tokens, megatron_time_s += m.tokens * lpt;
    }
    if (progress) {
      progress->update(head + "  step " + std::to_string(so_far.steps) + "/" +
                       std::to_string(spec.steps_per_episode) + "  mean reward " +
                       fixed(so_far.total_reward / so_far.steps, 4));
    }
  };
  const EpisodeSummary s = run_episode(env, agent, stats.seed, learn, hooks);
  stats.steps = s.steps;
  stats.failed_steps = s.failed_steps;
  stats.error = s.error;
  stats.final_plan = s.final_plan;
  stats.repartition_s = s.repartition_s;
  stats.mean_reward = s.total_reward / s.steps;
  stats.mean_throughput = s.throughput;
  // Over the steps where the baseline could be evaluated.
  stats.megatron_throughput = megatron_time_s > 0 ? megatron_tokens / megatron_time_s : 0;
  if (progress) {
    progress->line(head + ": " + std::to_string(stats.steps) + " steps, mean reward " +
                   fixed(stats.mean_reward, 4) +
                   (stats.failed_steps ? ", ended by a failed step" : std::string()));
  }
  return stats;
}

}  // namespace

TrainResult run_training(ExperimentSpec spec, const TrainOptions& options) {
  if (options.seed) spec.seeds = {*options.seed};
  if (options.episodes) spec.episodes = *options.episodes;
  if (options.steps) spec.steps_per_episode = *options.steps;
  if (options.train_steps) spec.agent.train_steps = *options.train_steps;
  if (spec.episodes < 1) throw std::invalid_argument("episodes must be at least 1");
  if (spec.steps_per_episode < 1) throw std::invalid_argument("steps must be at least 1");
  const uint64_t seed = spec.seeds.empty() ? 0 : spec.seeds.front();

  const OutputPaths paths = prepare_out_dir(options.out_dir);
  TrainResult result;
  result.env_id = spec.env_id;
  result.trace_path = paths.trace;
  auto writer =
      std::make_shared<TraceWriter>(result.trace_path, make_trace_metadata(spec, options.git_sha));
  auto env = std::make_unique<RecordTrace>(make_env(spec.env_id, spec), writer);
  std::unique_ptr<Agent> agent = make_agent(spec.agent.id, env->spec(), seed);
  result.agent = agent->name();
  writer->set_agent(result.agent);
  const Plan megatron = megatron_baseline(*env, spec);

  const bool trained = agent->learns() && spec.agent.train_steps > 0 &&
                       train_vectorised(spec, options, seed, *agent, paths, result);
  for (int k = 0; k < spec.episodes; ++k) {
    const bool learn = agent->learns() && !trained;
    result.episodes.push_back(
        play_episode(spec, *env, *agent, megatron, k, seed, learn, options.progress));
    // A learner that learns during the episodes: its state after each one.
    if (learn) agent->save(paths.checkpoint);
  }
  env.reset();  // closes the last episode: RecordTrace flushes it
  writer->close();

  if (agent->learns()) {
    result.checkpoint_path = paths.checkpoint;
    agent->save(result.checkpoint_path);
  }
  return result;
}

Table training_summary(const TrainResult& result) {
  Table t({"episode", "seed", "steps", "mean reward", "tokens/s (agent)", "tokens/s (Megatron)",
           "ratio"});
  for (int c = 1; c < t.columns(); ++c) t.set_align(c, Align::kRight);
  double agent_sum = 0, megatron_sum = 0;
  int megatron_n = 0;
  for (const EpisodeStats& e : result.episodes) {
    const bool known = e.megatron_throughput > 0;
    t.add_row({std::to_string(e.episode + 1), std::to_string(e.seed), std::to_string(e.steps),
               fixed(e.mean_reward, 4), fixed(e.mean_throughput, 0),
               known ? fixed(e.megatron_throughput, 0) : "n/a",
               known ? fixed(e.mean_throughput / e.megatron_throughput, 3) + "x" : "n/a"});
    agent_sum += e.mean_throughput;
    if (known) megatron_sum += e.megatron_throughput, ++megatron_n;
  }
  if (result.episodes.size() > 1) {
    const double n = static_cast<double>(result.episodes.size());
    const bool known = megatron_n == static_cast<int>(result.episodes.size());
    t.add_row({"mean", "", "", "", fixed(agent_sum / n, 0),
               known ? fixed(megatron_sum / n, 0) : "n/a",
               known ? fixed(agent_sum / megatron_sum, 3) + "x" : "n/a"});
  }
  return t;
}

}  // namespace shardgym
