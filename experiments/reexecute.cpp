#include "experiments/reexecute.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "datasets/trace_reader.h"
#include "datasets/trace_summary.h"
#include "env/registry.h"
#include "experiments/config.h"

namespace shardgym {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kSimEnv = "shardgym/TPSim-v0";
constexpr const char* kLiveEnv = "shardgym/TPLive-v0";

double relative(double replayed, double recorded) {
  if (replayed == recorded || (std::isnan(replayed) && std::isnan(recorded))) return 0;
  if (std::isnan(replayed) || std::isnan(recorded)) return kInf;
  return std::abs(replayed - recorded) / std::max(std::abs(recorded), 1e-300);
}

double max_of(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v)
    if (!std::isnan(x)) m = std::max(m, x);
  return m;
}

ExperimentSpec config_of(const TraceReader& reader, const ReexecuteOptions& options) {
  if (!options.config.empty()) return load_experiment(options.config);
  const TraceAttributes& a = reader.attributes();
  namespace fs = std::filesystem;
  const std::string base =
      a.config_path.empty() ? std::string(".") : fs::path(a.config_path).parent_path().string();
  try {
    // Its hardware files and calibration from the copies the trace carries, not from disk.
    return parse_recorded_experiment(a.config, "trace '" + reader.path() + "' config", base);
  } catch (const ConfigError& e) {
    throw std::runtime_error(std::string(e.what()) + " (the trace's config no longer loads here" +
                             (a.config_path.empty() ? "" : "; it was read from " + a.config_path) +
                             "; pass the config with --config)");
  }
}

// The recorded widths against the env built from the config: observations, blocks, ranks.
void check_widths(const std::string& trace, const TraceEpisode& ep, const Env& env,
                  const ExperimentSpec& spec) {
  int64_t obs_width = 1;
  for (int64_t d : env.spec().observation_space.shape) obs_width *= d;
  auto check_width = [&](const char* what, int64_t recorded, int64_t built) {
    if (recorded != built) {
      throw std::runtime_error("trace '" + trace + "': " + what + " " + std::to_string(recorded) +
                               " recorded, " + std::to_string(built) +
                               " in the env built from its config");
    }
  };
  check_width("observation width", ep.obs_dim, obs_width);
  check_width("blocks per plan", ep.num_blocks, spec.model.num_blocks());
  check_width("ranks per metric row", ep.world, spec.cluster.world_size());
}

// Each figure's median and largest drift over the steps, and whether all are within tolerance.
void summarize_drift(DriftReport& report) {
  for (DriftComponent& c : report.components) {
    if (c.per_step.empty()) continue;
    std::vector<double> sorted = c.per_step;
    std::sort(sorted.begin(), sorted.end());
    c.median = sorted[sorted.size() / 2];
    const auto worst = std::max_element(c.per_step.begin(), c.per_step.end());
    c.max = *worst;
    c.worst_step = static_cast<int>(worst - c.per_step.begin());
    report.within_tolerance = report.within_tolerance && c.max <= report.tolerance;
  }
}

}  // namespace

DriftReport reexecute_episode(const std::string& trace, int episode,
                              const ReexecuteOptions& options) {
  const TraceReader reader(trace);
  const TraceEpisode ep = reader.read_episode(episode);
  DriftReport report;
  report.trace = trace;
  report.episode = episode;
  report.seed = ep.info.seed;
  report.initial_plan = ep.info.initial_plan;
  report.steps = ep.steps();

  ExperimentSpec spec = config_of(reader, options);
  std::string env_id = reader.attributes().env_id;
  if (env_id == "shardgym/TPReplay-v0") {
    throw std::runtime_error("trace '" + trace +
                             "' records a replay; re-execute the trace it "
                             "replays (" +
                             spec.replay_trace + ") instead");
  }
  if (options.backend == "sim")
    env_id = kSimEnv;
  else if (options.backend == "live")
    env_id = kLiveEnv;
  else if (!options.backend.empty())
    throw std::invalid_argument("--backend: sim or live, not '" + options.backend + "'");
  if (!env_registered(env_id)) {
    throw std::runtime_error("env " + env_id +
                             " is not in this build (the live backend needs "
                             "LibTorch)");
  }
  report.env_id = env_id;
  report.backend = env_id == kLiveEnv ? "live" : "sim";
  report.tolerance = options.tolerance >= 0     ? options.tolerance
                     : report.backend == "live" ? 0.25
                                                : 1e-9;
  // The recorded episode's start, and room for every recorded step.
  if (!ep.info.initial_plan.empty()) spec.initial_plan = ep.info.initial_plan;
  spec.env_id = env_id;
  spec.steps_per_episode = std::max(spec.steps_per_episode, report.steps);

  std::unique_ptr<Env> env = make_env(env_id, spec);
  const auto& nvec = env->spec().action_space.nvec;
  if (static_cast<int>(nvec.size()) != ep.action_dim) {
    throw std::runtime_error("trace '" + trace + "': its actions have " +
                             std::to_string(ep.action_dim) +
                             " entries, the env built from its "
                             "config takes " +
                             std::to_string(nvec.size()));
  }
  check_widths(trace, ep, *env, spec);
  env->reset(ep.info.seed);

  // A trace written before repartition_peak_bytes was recorded has NaN there: left out.
  const bool has_repartition_peak =
      std::none_of(ep.repartition_peak_bytes.begin(), ep.repartition_peak_bytes.end(),
                   [](double v) { return std::isnan(v); });
  std::vector<std::string> names = {
      "reward",   "step_latency_s", "repartition_s",    "repartition_bytes",
      "energy_j", "tokens",         "peak_memory_bytes"};
  if (has_repartition_peak) names.push_back("repartition_peak_bytes");
  report.components.resize(names.size());
  for (size_t c = 0; c < names.size(); ++c) {
    report.components[c].name = names[c];
    report.components[c].per_step.assign(report.steps, kInf);
  }
  const size_t P = static_cast<size_t>(ep.world);
  for (int t = 0; t < report.steps; ++t) {
    const Action action(ep.actions.begin() + size_t(t) * ep.action_dim,
                        ep.actions.begin() + size_t(t + 1) * ep.action_dim);
    const StepResult r = env->step(action);
    const Measurement& m = r.info.measurement;
    const bool failed_now = !r.info.error.empty() || !m.ok || m.oom;
    const bool failed_then = !ep.ok[t] || ep.oom[t];
    if (failed_now != failed_then) break;  // the rest stays at inf: the runs diverged
    const std::vector<double> recorded_peak(ep.peak_memory_bytes.begin() + t * P,
                                            ep.peak_memory_bytes.begin() + (t + 1) * P);
    const double now[] = {r.reward,
                          m.step_latency_s,
                          m.repartition_s,
                          m.repartition_bytes,
                          m.energy_j,
                          m.tokens,
                          max_of(m.peak_memory_bytes),
                          m.repartition_peak_bytes};
    const double then[] = {
        ep.rewards[t],         ep.step_latency_s[t],
        ep.repartition_s[t],   ep.repartition_bytes[t],
        ep.energy_j[t],        ep.tokens[t],
        max_of(recorded_peak), has_repartition_peak ? ep.repartition_peak_bytes[t] : 0.0};
    for (size_t c = 0; c < names.size(); ++c)
      report.components[c].per_step[t] = relative(now[c], then[c]);
    if ((r.terminated || r.truncated) && t + 1 < report.steps) break;
  }
  summarize_drift(report);
  return report;
}

std::string format_drift(const DriftReport& r, bool per_step) {
  std::ostringstream out;
  out << "re-executed episode_" << r.episode << " of " << r.trace << " on " << r.env_id << " (seed "
      << r.seed << ", " << r.steps << " steps from '" << r.initial_plan << "')\n";
  out << std::left << std::setw(20) << "figure" << std::right << std::setw(14) << "median drift"
      << std::setw(14) << "max drift" << std::setw(8) << "step"
      << "\n";
  auto fmt = [](double v) {
    std::ostringstream s;
    if (std::isinf(v))
      s << "diverged";
    else
      s << std::scientific << std::setprecision(2) << v;
    return s.str();
  };
  for (const DriftComponent& c : r.components) {
    out << std::left << std::setw(20) << c.name << std::right << std::setw(14) << fmt(c.median)
        << std::setw(14) << fmt(c.max) << std::setw(8) << c.worst_step << "\n";
  }
  if (per_step) {
    out << "\nper step (relative drift):\nstep";
    for (const DriftComponent& c : r.components) out << "  " << c.name;
    out << "\n";
    for (int t = 0; t < r.steps; ++t) {
      out << t;
      for (const DriftComponent& c : r.components) out << "  " << fmt(c.per_step[t]);
      out << "\n";
    }
  }
  out << "drift is |replayed - recorded| / |recorded| per step; tolerance " << r.tolerance << ": "
      << (r.within_tolerance ? "within" : "EXCEEDED") << "\n";
  return out.str();
}

std::string drift_json(const DriftReport& r) {
  std::ostringstream out;
  out << std::setprecision(17);
  auto num = [&](double v) {
    if (std::isinf(v))
      out << "null";
    else
      out << v;
  };
  out << "{\"trace\": " << json_string(r.trace) << ", \"episode\": " << r.episode
      << ", \"env_id\": " << json_string(r.env_id) << ", \"seed\": " << r.seed
      << ", \"steps\": " << r.steps << ", \"tolerance\": " << r.tolerance
      << ", \"within_tolerance\": " << (r.within_tolerance ? "true" : "false")
      << ", \"components\": {";
  for (size_t i = 0; i < r.components.size(); ++i) {
    const DriftComponent& c = r.components[i];
    out << (i ? ", " : "") << json_string(c.name) << ": {\"median\": ";
    num(c.median);
    out << ", \"max\": ";
    num(c.max);
    out << ", \"worst_step\": " << c.worst_step << ", \"per_step\": [";
    for (size_t t = 0; t < c.per_step.size(); ++t) {
      if (t) out << ", ";
      num(c.per_step[t]);
    }
    out << "]}";
  }
  out << "}}\n";
  return out.str();
}

std::string check_trace_widths(const TraceSummary& s) {
  const TraceAttributes& a = s.attributes;
  if (s.num_blocks == 0) return "no complete episode";
  if (a.env_id != kSimEnv && a.env_id != kLiveEnv) return "env " + a.env_id + " is not rebuilt";
  if (!env_registered(a.env_id)) return "env " + a.env_id + " is not in this build";
  ExperimentSpec spec;
  try {
    spec = parse_recorded_experiment(a.config, "trace '" + s.path + "' config", "/nonexistent");
  } catch (const ConfigError& e) {
    return std::string("its config does not load here: ") + e.what();
  }
  std::unique_ptr<Env> env = make_env(a.env_id, spec);
  int64_t obs_width = 1;
  for (int64_t d : env->spec().observation_space.shape) obs_width *= d;
  const struct {
    const char* what;
    int64_t recorded, built;
  } widths[] = {
      {"observation width", s.obs_dim, obs_width},
      {"action entries", s.action_dim, static_cast<int64_t>(env->spec().action_space.nvec.size())},
      {"blocks per plan", s.num_blocks, spec.model.num_blocks()},
      {"ranks per metric row", s.world, spec.cluster.world_size()}};
  for (const auto& w : widths) {
    if (w.recorded != w.built) {
      throw std::runtime_error("trace '" + s.path + "': " + w.what + " " +
                               std::to_string(w.recorded) + " recorded, " +
                               std::to_string(w.built) + " in the env built from its config");
    }
  }
  return "";
}

}  // namespace shardgym
