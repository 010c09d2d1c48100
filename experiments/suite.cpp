#include "experiments/suite.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "agents/trainer.h"
#include "env/registry.h"
#include "env/vector_env.h"
#include "env/wrappers.h"
#include "experiments/config.h"
#include "experiments/config_parts.h"
#include "experiments/yaml_field.h"

namespace shardgym {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxInstances = 100000;

// `[0, 1, 2]` or `{first: 1000, count: 32}`.
std::vector<uint64_t> parse_instances(const YamlField& f) {
  std::vector<uint64_t> out;
  if (f.is_sequence()) {
    if (f.size() == 0 || f.size() > size_t(kMaxInstances))
      f.fail("needs 1 to " + std::to_string(kMaxInstances) + " instances");
    for (size_t i = 0; i < f.size(); ++i) out.push_back(static_cast<uint64_t>(f.at(i).as_int(0)));
  } else {
    f.expect_map();
    f.check_keys({"first", "count"});
    const int first = f.child("first").as_int(0);
    const int count = f.child("count").as_int(1, kMaxInstances);
    for (int i = 0; i < count; ++i) out.push_back(static_cast<uint64_t>(first) + i);
  }
  std::set<uint64_t> seen;
  for (uint64_t s : out)
    if (!seen.insert(s).second) f.fail("instance " + std::to_string(s) + " is listed twice");
  return out;
}

double log_ratio(double a, double b) { return a > 0 && b > 0 ? std::log(a / b) : NAN; }

Interval exp_interval(Interval ci) {
  ci.point = std::exp(ci.point);
  ci.low = std::exp(ci.low);
  ci.high = std::exp(ci.high);
  return ci;
}

// Mean over strata of each stratum's mean, with a percentile bootstrap that resamples within
// each stratum (rliable's stratified bootstrap); raw engine draws, so the same everywhere.
Interval stratified_mean_ci(const std::vector<std::vector<double>>& strata,
                            const BootstrapOptions& o) {
  Interval ci;
  auto mean_of = [&](auto pick) {
    double total = 0;
    for (size_t s = 0; s < strata.size(); ++s) {
      double sum = 0;
      for (size_t i = 0; i < strata[s].size(); ++i) sum += pick(s, i);
      total += sum / double(strata[s].size());
    }
    return total / double(strata.size());
  };
  ci.point = mean_of([&](size_t s, size_t i) { return strata[s][i]; });
  for (const auto& s : strata) ci.n += static_cast<int>(s.size());
  std::mt19937_64 rng(o.seed);
  std::vector<double> stats;
  for (int r = 0; r < o.resamples; ++r)
    stats.push_back(mean_of([&](size_t s, size_t) {
      return strata[s][static_cast<size_t>(double(rng() >> 11) * 0x1.0p-53 * strata[s].size())];
    }));
  const double tail = (1 - o.confidence) / 2;
  ci.low = quantile(stats, tail);
  ci.high = quantile(stats, 1 - tail);
  return ci;
}

SuiteEpisode play(const ExperimentSpec& task, Agent& agent, uint64_t instance) {
  std::unique_ptr<Env> env = make_env(task.env_id, with_instance(task, instance));
  const EpisodeSummary s = run_episode(*env, agent, instance, /*learn=*/false);
  return {instance, s.throughput, s.repartition_s, s.wall_s, s.failed_steps > 0,
          s.failed_steps > 0 ? (s.error.empty() ? "out of memory" : s.error) : ""};
}

// A training env that plays the next of its training instances at every reset: env k of n
// plays instances k, k + n, k + 2n, ... of the list, round and round, so that n envs cover
// every training instance rather than the first n. The inner env is rebuilt for the instance
// (the same task, so the same spaces). Each instance played goes into `played`.
struct PlayedInstances {
  std::mutex mu;  // VectorEnv resets its envs on threads
  std::set<uint64_t> set;
};

class CycleInstances : public Wrapper {
 public:
  CycleInstances(const ExperimentSpec& task, std::vector<uint64_t> instances, size_t first,
                 size_t stride, std::shared_ptr<PlayedInstances> played)
      : Wrapper(make_env(task.env_id, with_instance(task, instances.at(first)))),
        task_(task),
        instances_(std::move(instances)),
        next_(first),
        stride_(stride),
        played_(std::move(played)) {}
  ResetResult reset(std::optional<uint64_t> seed = std::nullopt) override {
    if (started_) {
      next_ = (next_ + stride_) % instances_.size();
      inner_ = make_env(task_.env_id, with_instance(task_, instances_[next_]));
    }
    started_ = true;
    {
      std::lock_guard<std::mutex> lock(played_->mu);
      played_->set.insert(instances_[next_]);
    }
    return inner_->reset(seed);
  }
  void step_into(const Action& action, StepResult& out) override {
    inner_->step_into(action, out);
  }
  void action_mask_into(uint8_t* out, size_t size) const override {
    inner_->action_mask_into(out, size);
  }

 private:
  const ExperimentSpec& task_;
  std::vector<uint64_t> instances_;
  size_t next_, stride_;
  std::shared_ptr<PlayedInstances> played_;
  bool started_ = false;
};

// Trains `agent` on training instances only; keeps the update whose greedy episodes on the
// training instances that no training env plays (the last suite.pick_instances, where there
// are more training instances than that) returned most on average. Every env step the learner
// causes — rollouts, its own searches, and those greedy episodes, which pick the policy kept —
// counts toward run.train_env_steps.
void train_on(const SuiteSpec& suite, const ExperimentSpec& task, Agent& agent, SuiteRun& run,
              const SuiteOptions& o) {
  std::vector<uint64_t> train = suite.train_instances;
  std::vector<uint64_t> pick;
  while (pick.size() < static_cast<size_t>(std::max(1, suite.pick_instances)) && !train.empty()) {
    pick.insert(pick.begin(), train.back());
    if (train.size() > 1) train.pop_back();
    else break;
  }
  const int n = std::max(1, std::min<int>(suite.train_envs, static_cast<int>(train.size())));
  const CountSteps::Counter steps = std::make_shared<std::atomic<int64_t>>(0);
  std::vector<std::unique_ptr<CountSteps>> pick_envs;
  std::vector<Trainer::Held> held;
  for (uint64_t instance : pick) {
    pick_envs.push_back(std::make_unique<CountSteps>(
        make_env(task.env_id, with_instance(task, instance)), steps));
    held.push_back({pick_envs.back().get(), instance});
  }
  const auto played = std::make_shared<PlayedInstances>();
  const fs::path ckpt = fs::temp_directory_path() /
                        ("shardgym-suite-" + std::to_string(::getpid()) + ".ckpt");
  VectorEnv envs(n, [&](int k) {
    return std::make_unique<CountSteps>(
        std::make_unique<CycleInstances>(task, train, static_cast<size_t>(k), size_t(n), played),
        steps);
  });
  Trainer trainer(std::move(held), ckpt.string());
  const bool vectorised = trainer.run(agent, envs, suite.train_steps, [&](const TrainerUpdate&) {
    run.train_env_steps = steps->load();
    return true;
  });
  std::error_code ec;
  fs::remove(ckpt, ec);
  if (vectorised) {
    run.trained_on.assign(played->set.begin(), played->set.end());
    run.trained_on.insert(run.trained_on.end(), pick.begin(), pick.end());
    return;
  }
  // Agents without vectorised training learn episode by episode, round the training instances.
  for (size_t e = 0; run.train_env_steps < suite.train_steps; ++e) {
    const uint64_t instance = train[e % train.size()];
    run.trained_on.push_back(instance);
    std::unique_ptr<Env> env = make_env(task.env_id, with_instance(task, instance));
    const EpisodeSummary s = run_episode(*env, agent, instance, /*learn=*/true);
    run.train_env_steps += std::max(1, s.steps);
    if (o.on_progress && e % 10 == 9)
      o.on_progress("  training " + run.agent + ": " + std::to_string(run.train_env_steps) + "/" +
                    std::to_string(suite.train_steps) + " steps");
  }
}

}  // namespace

SuiteSpec load_suite(const std::string& path) {
  using namespace config_detail;
  const std::string text = read_config_text(path, path, "", 0);
  YamlField root(parse_yaml_text(text, path), path, "", 1);
  root.expect_map();
  root.check_keys({"name", "source", "tasks", "train_instances", "test_instances", "agents",
                   "training_seeds", "train_steps", "train_envs", "pick_instances"});
  SuiteSpec s;
  s.path = path;
  s.name = root.optional("name") ? root.child("name").as_string() : fs::path(path).stem().string();
  if (auto src = root.optional("source")) src->as_string();  // documentation only
  const fs::path dir = fs::path(path).parent_path();
  YamlField tasks = root.child("tasks");
  tasks.expect_sequence();
  if (tasks.size() == 0 || tasks.size() > 1000) tasks.fail("needs 1 to 1000 tasks");
  for (size_t i = 0; i < tasks.size(); ++i) {
    const YamlField t = tasks.at(i);
    const fs::path p = fs::path(t.as_string());
    const std::string full = p.is_absolute() ? p.string() : (dir / p).string();
    ExperimentSpec spec;
    try {
      spec = load_experiment(full);
    } catch (const ConfigError& e) {
      t.fail(std::string("task does not load: ") + e.what());
    }
    // The references (hindsight-static, dynamic-oracle) estimate plans: a simulator only.
    if (spec.env_id != "shardgym/TPSim-v0")
      t.fail("task '" + full + "' runs " + spec.env_id +
             "; a suite's references (hindsight-static, dynamic-oracle) need shardgym/TPSim-v0");
    s.task_paths.push_back(full);
    s.tasks.push_back(std::move(spec));
  }
  s.train_instances = parse_instances(root.child("train_instances"));
  s.test_instances = parse_instances(root.child("test_instances"));
  const std::set<uint64_t> train(s.train_instances.begin(), s.train_instances.end());
  for (uint64_t t : s.test_instances)
    if (train.count(t))
      root.child("test_instances")
          .fail("instance " + std::to_string(t) +
                " is also a training instance; test instances must be unseen in training");
  if (auto a = root.optional("agents")) {
    a->expect_sequence();
    for (size_t i = 0; i < a->size(); ++i) {
      const YamlField f = a->at(i);
      try {
        check_agent_id(f.as_string());
      } catch (const std::invalid_argument& e) {
        f.fail(e.what());
      }
      s.agents.push_back(f.as_string());
    }
  }
  if (auto f = root.optional("training_seeds")) s.training_seeds = f->as_int(1, 100);
  if (auto f = root.optional("train_steps")) s.train_steps = f->as_int(0);
  if (auto f = root.optional("train_envs")) s.train_envs = f->as_int(1, 256);
  if (auto f = root.optional("pick_instances")) {
    s.pick_instances = f->as_int(1, 64);
    if (s.pick_instances >= static_cast<int>(s.train_instances.size()))
      f->fail("must be fewer than the " + std::to_string(s.train_instances.size()) +
              " training instances (the others train)");
  }
  return s;
}

SuiteResult run_suite(const SuiteSpec& suite, std::vector<std::string> agents,
                      const SuiteOptions& o) {
  if (agents.empty()) agents = suite.agents;
  std::vector<std::string> all;
  if (o.references) all.assign(std::begin(kSuiteReferences), std::end(kSuiteReferences));
  for (const std::string& id : agents)
    if (std::find(all.begin(), all.end(), id) == all.end()) all.push_back(id);
  for (const std::string& id : all) check_agent_id(id);
  SuiteResult r;
  r.name = suite.name;
  r.test_instances = suite.test_instances;
  r.agents = all;
  auto say = [&](const std::string& line) {
    if (o.on_progress) o.on_progress(line);
  };
  for (const ExperimentSpec& task : suite.tasks) {
    SuiteTask t;
    t.name = task.name;
    // The env spec agents are made for (the same for every instance of the task).
    const std::unique_ptr<Env> probe_env =
        make_env(task.env_id, with_instance(task, suite.test_instances.front()));
    for (const std::string& id : all) {
      const bool learns = make_agent(id, probe_env->spec(), 0)->learns();
      const int seeds = learns ? suite.training_seeds : 1;
      for (int seed = 0; seed < seeds; ++seed) {
        SuiteRun run;
        run.agent = id;
        run.training_seed = learns ? seed : -1;
        std::unique_ptr<Agent> agent;
        if (learns) {
          agent = make_agent(id, probe_env->spec(), static_cast<uint64_t>(seed));
          const auto t0 = std::chrono::steady_clock::now();
          train_on(suite, task, *agent, run, o);
          run.train_wall_s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          say(task.name + ": " + id + " seed " + std::to_string(seed) + " trained, " +
              std::to_string(run.train_env_steps) + " env steps, " +
              fixed(run.train_wall_s, 0) + " s");
        }
        for (uint64_t inst : suite.test_instances) {
          std::unique_ptr<Agent> fresh;
          if (!learns) fresh = make_agent(id, probe_env->spec(), inst);
          run.episodes.push_back(play(task, learns ? *agent : *fresh, inst));
          const SuiteEpisode& e = run.episodes.back();
          say(task.name + ": " + id + (learns ? " seed " + std::to_string(seed) : "") +
              " instance " + std::to_string(inst) + ": " + fixed(e.throughput, 0) +
              " tokens/s" + (e.failed ? " (ended by a failed step: " + e.error + ")" : "") + ", " +
              fixed(e.wall_s, 1) + " s");
        }
        t.runs.push_back(std::move(run));
      }
    }
    r.tasks.push_back(std::move(t));
  }
  return r;
}

const SuiteRun* find_suite_run(const SuiteTask& t, const std::string& agent) {
  for (const SuiteRun& r : t.runs)
    if (r.agent == agent) return &r;
  return nullptr;
}

namespace {

// Per task: log(agent / reference) per (run, instance), runs of `agent` in order.
struct TaskLogs {
  std::vector<double> vs_megatron, vs_hindsight, oracle_vs_hindsight;
  std::vector<double> seed_vs_hindsight;  // per run: mean log over instances
  int runs = 0, failed = 0;
  double repartition_s = 0, train_wall_s = 0, eval_wall_s = 0;
};

TaskLogs task_logs(const SuiteTask& t, const std::string& agent) {
  TaskLogs L;
  const SuiteRun* meg = find_suite_run(t, "megatron");
  const SuiteRun* hs = find_suite_run(t, "hindsight-static");
  const SuiteRun* dyn = find_suite_run(t, "dynamic-oracle");
  const bool refs = meg && hs && dyn;  // a run without references has no ratios
  int episodes = 0;
  for (const SuiteRun& run : t.runs) {
    if (run.agent != agent) continue;
    ++L.runs;
    L.train_wall_s += run.train_wall_s;
    double seed_sum = 0;
    int seed_n = 0;
    for (size_t i = 0; i < run.episodes.size(); ++i) {
      const SuiteEpisode& e = run.episodes[i];
      L.failed += e.failed;
      L.repartition_s += e.repartition_s;
      L.eval_wall_s += e.wall_s;
      ++episodes;
      // An episode a failed step ended is not a throughput: it stopped before the rest of the
      // episode's work (a node-loss episode that fails before the loss skips its dearest
      // part). Counted in `failed`, left out of the ratios.
      if (!refs || e.failed) continue;
      const double m = log_ratio(e.throughput, meg->episodes[i].throughput);
      const double h = log_ratio(e.throughput, hs->episodes[i].throughput);
      const double d = log_ratio(dyn->episodes[i].throughput, hs->episodes[i].throughput);
      if (std::isnan(m) || std::isnan(h) || std::isnan(d)) continue;  // a step failed first
      L.vs_megatron.push_back(m);
      L.vs_hindsight.push_back(h);
      L.oracle_vs_hindsight.push_back(d);
      seed_sum += h;
      ++seed_n;
    }
    // NaN for a seed whose every episode failed: the seeds stay aligned across tasks.
    if (refs) L.seed_vs_hindsight.push_back(seed_n ? seed_sum / seed_n : NAN);
  }
  if (episodes) L.repartition_s /= episodes;
  return L;
}

// Seeds min-max: exp of the least and largest of `logs` / n, the seeds without a figure (NaN:
// every episode failed) left out; NaN where no seed has one.
void set_seed_range(const std::vector<double>& logs, int n, SuiteRow& row) {
  row.seed_low = row.seed_high = NAN;
  for (double l : logs) {
    if (std::isnan(l)) continue;
    const double v = std::exp(l / n);
    row.seed_low = std::isnan(row.seed_low) ? v : std::min(row.seed_low, v);
    row.seed_high = std::isnan(row.seed_high) ? v : std::max(row.seed_high, v);
  }
}

SuiteRow row_of(const std::string& task, const std::string& agent, const TaskLogs& L,
                const BootstrapOptions& b) {
  SuiteRow row;
  row.task = task;
  row.agent = agent;
  row.runs = L.runs;
  row.failed = L.failed;
  row.repartition_s = L.repartition_s;
  row.train_wall_s = L.train_wall_s;
  row.eval_wall_s = L.eval_wall_s;
  if (L.vs_megatron.empty()) {
    row.gain_share = NAN;
    return row;
  }
  row.vs_megatron = exp_interval(bootstrap_ci(L.vs_megatron, Statistic::kMean, b));
  row.vs_hindsight = exp_interval(bootstrap_ci(L.vs_hindsight, Statistic::kMean, b));
  set_seed_range(L.seed_vs_hindsight, 1, row);
  double gained = 0, possible = 0;
  for (size_t i = 0; i < L.vs_hindsight.size(); ++i) {
    gained += L.vs_hindsight[i];
    possible += L.oracle_vs_hindsight[i];
  }
  row.headroom = std::exp(mean(L.oracle_vs_hindsight));
  // Below 0.1 % of headroom the share is noise over noise: not reported.
  row.gain_share = possible > 1e-3 * double(L.vs_hindsight.size()) ? gained / possible : NAN;
  return row;
}

}  // namespace

std::vector<SuiteRow> suite_rows(const SuiteResult& r, const BootstrapOptions& b) {
  std::vector<SuiteRow> rows;
  for (const SuiteTask& t : r.tasks)
    for (const std::string& agent : r.agents) rows.push_back(row_of(t.name, agent, task_logs(t, agent), b));
  return rows;
}

std::vector<SuiteRow> suite_overall(const SuiteResult& r, const BootstrapOptions& b) {
  std::vector<SuiteRow> rows;
  for (const std::string& agent : r.agents) {
    SuiteRow row;
    row.task = "overall";
    row.agent = agent;
    std::vector<std::vector<double>> meg, hs, dyn;
    std::vector<double> seed_sum;  // per training seed: Σ over tasks of its mean log ratio
    double gained = 0, possible = 0;
    int tasks = 0;
    for (const SuiteTask& t : r.tasks) {
      const TaskLogs L = task_logs(t, agent);
      row.runs = std::max(row.runs, L.runs);
      row.failed += L.failed;
      row.train_wall_s += L.train_wall_s;
      row.eval_wall_s += L.eval_wall_s;
      row.repartition_s += L.repartition_s;
      ++tasks;
      if (L.vs_megatron.empty()) continue;
      meg.push_back(L.vs_megatron);
      hs.push_back(L.vs_hindsight);
      dyn.push_back(L.oracle_vs_hindsight);
      if (meg.size() == 1) seed_sum.assign(L.seed_vs_hindsight.size(), 0.0);
      if (seed_sum.size() != L.seed_vs_hindsight.size()) seed_sum.clear();  // seeds differ
      for (size_t k = 0; k < seed_sum.size(); ++k) seed_sum[k] += L.seed_vs_hindsight[k];
      for (size_t i = 0; i < L.vs_hindsight.size(); ++i) {
        gained += L.vs_hindsight[i] / double(L.vs_hindsight.size());
        possible += L.oracle_vs_hindsight[i] / double(L.vs_hindsight.size());
      }
    }
    if (tasks) row.repartition_s /= tasks;
    // Over every task or not at all: an agent run on some tasks only (a merge of partial
    // runs) has no overall figures, rather than its tasks' standing in for all of them.
    if (meg.empty() || meg.size() != static_cast<size_t>(tasks)) {
      row.gain_share = NAN;
      rows.push_back(row);
      continue;
    }
    row.vs_megatron = exp_interval(stratified_mean_ci(meg, b));
    row.vs_hindsight = exp_interval(stratified_mean_ci(hs, b));
    row.headroom = std::exp(stratified_mean_ci(dyn, b).point);
    // Each training seed's overall figure: the mean over tasks of its mean log ratio (tasks
    // weigh equally, as in the stratified mean).
    row.seed_low = row.seed_high = row.vs_hindsight.point;
    if (!seed_sum.empty()) set_seed_range(seed_sum, tasks, row);
    row.gain_share = possible > 1e-3 * double(meg.size()) ? gained / possible : NAN;
    rows.push_back(row);
  }
  return rows;
}

namespace {

std::string ci_text(const Interval& ci) {
  return fixed(ci.point, 3) + " [" + fixed(ci.low, 3) + ", " + fixed(ci.high, 3) + "]";
}

std::string share_text(double s) { return std::isnan(s) ? "-" : fixed(100 * s, 0) + " %"; }

}  // namespace

std::string format_suite(const SuiteResult& r, TableFormat format, const BootstrapOptions& b) {
  std::vector<SuiteRow> rows = suite_rows(r, b);
  const std::vector<SuiteRow> overall = suite_overall(r, b);
  rows.insert(rows.end(), overall.begin(), overall.end());
  std::ostringstream out;
  out << "suite " << r.name << ": " << r.tasks.size() << " tasks, " << r.test_instances.size()
      << " test instances each (never trained on)\n\n";
  Table head({"task", "headroom (dynamic-oracle / hindsight-static)", "instances"});
  for (const SuiteRow& row : rows)
    if (row.agent == "dynamic-oracle")
      head.add_row({row.task, fixed(row.headroom, 3) + (row.task == "overall" ? " (geomean)" : ""),
                    std::to_string(row.vs_megatron.n)});
  out << head.render(format) << "\n";
  Table t({"task", "agent", "runs", "x megatron [95% CI]", "x hindsight-static [95% CI]",
           "seeds min-max", "share of oracle gain", "repartition s/ep", "train s", "eval s",
           "failed"});
  for (int c : {2, 3, 4, 5, 6, 7, 8, 9, 10}) t.set_align(c, Align::kRight);
  for (const SuiteRow& row : rows) {
    const bool any = row.vs_megatron.n > 0;
    t.add_row({row.task, row.agent, std::to_string(row.runs), any ? ci_text(row.vs_megatron) : "-",
               any ? ci_text(row.vs_hindsight) : "-",
               row.runs > 1 && any && !std::isnan(row.seed_low)
                   ? fixed(row.seed_low, 3) + "-" + fixed(row.seed_high, 3)
                   : "",
               row.agent == "megatron" || row.agent == "hindsight-static"
                   ? std::string()  // references: their share is not a result
                   : share_text(row.gain_share),
               fixed(row.repartition_s, 2),
               row.train_wall_s > 0 ? fixed(row.train_wall_s, 0) : "", fixed(row.eval_wall_s, 0),
               std::to_string(row.failed)});
  }
  out << t.render(format)
      << "\nthroughput ratios: geometric means over test instances (repartitions included) of "
         "the agent's tokens/s over the reference's on the same instance, percentile "
         "bootstrap 95 % over instances ("
      << b.resamples << " resamples, seed " << b.seed
      << "; overall: stratified by task). share of oracle gain: sum of log(agent / "
         "hindsight-static) over sum of log(dynamic-oracle / hindsight-static); '-' where the "
         "oracle gains under 0.1 %. Learners: runs = training seeds, pooled; seeds min-max = "
         "each seed's x hindsight-static. failed: episodes a failed step ended (out of memory, "
         "an invalid plan), left out of the ratios (and a seed with none left on a task, out of "
         "the seeds' range). Simulator figures: its error against published runs is in "
         "docs/simulator-fidelity.md.\n";
  return out.str();
}

}  // namespace shardgym
