// `shardgym validate-sim --published DIR`: the simulator against published, measured runs.
//
// Every config of DIR carries a `published:` section (figures and their source). Its initial
// plan (with the pipeline part, `@pp(...)`) is run for one noise-free iteration on the
// simulator; the iteration time gives model FLOP/s per GPU with the formula of
// docs/published-runs.md,  72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) / (T · GPUs),
// which counts no recomputation and the full (non-causal) attention, whatever ran.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <map>
#include <tuple>

#include "analysis/stats.h"
#include "analysis/table.h"
#include "experiments/calibrate.h"
#include "experiments/calibrate_pipelines.h"
#include "experiments/published_table.h"
#include "experiments/cli/commands.h"
#include "experiments/config.h"
#include "runtime/sim/sim_run.h"

namespace shardgym::cli {
namespace fs = std::filesystem;
namespace {

struct Row {
  std::string name, plan, source;
  std::string model;  // the architecture (layers, hidden, heads, FFN, sequence, vocabulary)
  double predicted_s = 0, published_s = 0;
  double predicted_tf = 0, published_tf = 0;
  double peak_gib = 0, capacity_gib = 0;
  bool fits = false;
  double error = 0;  // predicted / published − 1 of throughput (or of time if only that)
};

double model_flops(const ModelSpec& m) {
  const double b = effective_global_batch(m, 1), s = m.seq, l = m.layers, h = m.hidden;
  return 72 * b * s * l * h * h * (1 + s / (6 * h) + double(m.vocab) / (12 * l * h));
}

Row validate_one(const std::string& path) {
  const ExperimentSpec spec = load_experiment(path);
  if (spec.published.source.empty())
    throw BadInput(path + ": no `published:` section (source and figures) to validate against");
  SimRun run(spec);
  const Plan plan = run.plan();
  const auto m = run.estimate(plan);
  if (!m || !m->ok) throw BadInput(path + ": the simulator cannot run the initial plan: " + (m ? m->error : ""));
  Row r;
  r.name = spec.name;
  const ModelSpec& md = spec.model;
  r.model = "L" + std::to_string(md.layers) + " h" + std::to_string(md.hidden) + " a" +
            std::to_string(md.heads) + " f" + std::to_string(md.ffn_size()) + " s" +
            std::to_string(md.seq) + " V" + std::to_string(md.vocab);
  // Llama's blocks are another model with the same sizes (docs/configs.md "Model shapes").
  if (md.kv_head_count() != md.heads) r.model += " kv" + std::to_string(md.kv_heads);
  if (md.swiglu) r.model += " swiglu";
  r.plan = plan.to_string();
  r.source = spec.published.source;
  r.predicted_s = m->step_latency_s;
  r.published_s = spec.published.iteration_s;
  const int gpus = spec.cluster.world_size();
  r.predicted_tf = model_flops(spec.model) / r.predicted_s / gpus / 1e12;
  r.published_tf = spec.published.tflops_per_gpu;
  if (r.published_tf <= 0 && r.published_s > 0)
    r.published_tf = model_flops(spec.model) / r.published_s / gpus / 1e12;
  const double peak = *std::max_element(m->peak_memory_bytes.begin(), m->peak_memory_bytes.end());
  r.peak_gib = peak / double(1ull << 30);
  r.capacity_gib = run.context().memory_capacity / double(1ull << 30);
  r.fits = !m->oom;
  r.error = r.predicted_tf / r.published_tf - 1;
  return r;
}

// A config whose `published:` names a table (experiments/published_table.h): every row run on
// the simulator with the config's device, link and model settings, the row's sizes and
// degrees, and the setup of the table's source (activation checkpointing of every layer,
// 1F1B over the row's pipeline stages, global / (micro-batch · DP) micro-batches).
struct TableReport {
  std::string name, source, csv;
  struct Run {
    TableRun row;
    std::string plan;
    double predicted_s = 0, measured_s = 0;
    bool fits = true;
  };
  std::vector<Run> runs;
  // Per job (the same model, GPUs and global batch, parallelised differently): Kendall's τ
  // of predicted against measured time, and the regret of the simulator's pick (measured
  // time of its fastest-predicted configuration over the measured fastest).
  struct Job {
    std::string key;
    int configs = 0;
    double tau = 0, regret = 1;
  };
  std::vector<Job> jobs;
};

std::string table_plan(const TableRun& r) {
  const std::string s = r.tp > 1 ? "tp1d(t=" + std::to_string(r.tp) + ",recompute=1)"
                                 : std::string("dp(recompute=1)");
  return "uniform:" + s + "@pp(p=" + std::to_string(r.pp) +
         ",m=" + std::to_string(r.global_batch / (r.micro_batch * r.dp)) + ")";
}

TableReport validate_table(const std::string& path, const ExperimentSpec& spec) {
  TableReport t;
  t.name = spec.name;
  t.source = spec.published.source;
  t.csv = (fs::path(path).parent_path() / spec.published.table).string();
  std::vector<TableRun> rows;
  try {
    rows = read_published_table(t.csv);
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  // A row on G GPUs runs on the config cluster's first G ranks.
  const int world = spec.cluster.world_size();
  std::map<std::tuple<int, int, int, int, int, int>, std::vector<size_t>> jobs;
  for (const TableRun& row : rows) {
    ExperimentSpec s = spec;
    s.model.hidden = row.hidden, s.model.heads = row.heads, s.model.layers = row.layers;
    s.model.seq = row.seq, s.model.micro_batch = row.micro_batch;
    s.model.global_batch = row.global_batch;
    if (row.gpus > world)
      throw BadInput(t.csv + ":" + std::to_string(row.line) + ": " + std::to_string(row.gpus) +
                     " GPUs, more than the " + std::to_string(world) + " of " + path);
    s.cluster = spec.cluster.slice(0, row.gpus);
    TableReport::Run run;
    run.row = row;
    run.plan = table_plan(row);
    s.initial_plan = run.plan;
    run.measured_s = row.iteration_ms / 1e3;
    try {
      SimRun sim(s);
      const auto m = sim.estimate(sim.plan());
      if (!m || !m->ok) throw std::invalid_argument(m ? m->error : "no estimate");
      run.predicted_s = m->step_latency_s;
      run.fits = !m->oom;
    } catch (const std::exception& e) {
      throw BadInput(t.csv + ":" + std::to_string(row.line) + ": the simulator cannot run " +
                     run.plan + ": " + e.what());
    }
    jobs[{row.hidden, row.heads, row.layers, row.seq, row.gpus, row.global_batch}].push_back(
        t.runs.size());
    t.runs.push_back(run);
  }
  for (const auto& [key, idx] : jobs) {
    if (idx.size() < 2) continue;
    TableReport::Job j;
    const auto& [h, a, l, sq, g, b] = key;
    j.key = "h" + std::to_string(h) + " L" + std::to_string(l) + " " + std::to_string(g) +
            " GPUs batch " + std::to_string(b);
    j.configs = static_cast<int>(idx.size());
    std::vector<double> pred, meas;
    for (size_t i : idx) pred.push_back(t.runs[i].predicted_s), meas.push_back(t.runs[i].measured_s);
    j.tau = kendall_tau(pred, meas);
    const size_t pick = std::min_element(pred.begin(), pred.end()) - pred.begin();
    j.regret = meas[pick] / *std::min_element(meas.begin(), meas.end());
    t.jobs.push_back(j);
  }
  return t;
}

// mean, median and max of |predicted/measured - 1|, and how many are too fast.
struct ErrorStats {
  double mean = 0, median = 0, p90 = 0, max = 0;
  int too_fast = 0, n = 0;
};
ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ErrorStats e;
  std::vector<double> abs_err;
  for (size_t i = 0; i < predicted.size(); ++i) {
    abs_err.push_back(std::fabs(predicted[i] / measured[i] - 1));
    e.too_fast += predicted[i] < measured[i] ? 1 : 0;
  }
  e.n = static_cast<int>(abs_err.size());
  if (abs_err.empty()) return e;
  e.mean = mean(abs_err);
  e.median = median(abs_err);
  e.p90 = quantile(abs_err, 0.9);
  e.max = *std::max_element(abs_err.begin(), abs_err.end());
  return e;
}

std::string table_text(const TableReport& t) {
  std::vector<double> pred, meas, tau, regret;
  int fits = 0;
  for (const auto& r : t.runs) pred.push_back(r.predicted_s), meas.push_back(r.measured_s), fits += r.fits;
  for (const auto& j : t.jobs) {
    if (std::isfinite(j.tau)) tau.push_back(j.tau);
    regret.push_back(j.regret);
  }
  const ErrorStats e = error_stats(pred, meas);
  std::ostringstream o;
  o << t.name << ": " << e.n << " measured runs of " << t.csv << " (" << t.source << ")\n"
    << "  iteration time, |predicted/measured - 1|: mean " << fixed(100 * e.mean, 1)
    << " %, median " << fixed(100 * e.median, 1) << " %, p90 " << fixed(100 * e.p90, 1)
    << " %, max " << fixed(100 * e.max, 1) << " %; too fast on " << e.too_fast << " of " << e.n
    << "; " << fits << " of " << e.n << " fit memory\n";
  if (!regret.empty()) {
    o << "  " << t.jobs.size() << " jobs (same model, GPUs and global batch, 2+ configurations): "
      << "Kendall tau of predicted vs measured time median "
      << (tau.empty() ? std::string("-") : fixed(median(tau), 2)) << ", min "
      << (tau.empty() ? std::string("-") : fixed(*std::min_element(tau.begin(), tau.end()), 2))
      << "; the simulator's pick is slower than the measured best by median "
      << fixed(100 * (median(regret) - 1), 1) << " %, max "
      << fixed(100 * (*std::max_element(regret.begin(), regret.end()) - 1), 1) << " %\n";
  }
  // Where the error sits: by GPUs and by pipeline degree.
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;
  for (const auto& r : t.runs) {
    for (const std::string& k : {"GPUs " + std::to_string(r.row.gpus),
                                 "TP " + std::to_string(r.row.tp),
                                 "PP " + std::to_string(r.row.pp),
                                 "micro-batch " + std::to_string(r.row.micro_batch)}) {
      by[k].first.push_back(r.predicted_s);
      by[k].second.push_back(r.measured_s);
    }
  }
  o << "  by slice: median |error| (too fast / runs)\n";
  for (const auto& [k, v] : by) {
    const ErrorStats s = error_stats(v.first, v.second);
    o << "    " << std::left << std::setw(16) << k << std::right << std::setw(7)
      << fixed(100 * s.median, 1) << " %  (" << s.too_fast << " / " << s.n << ")\n";
  }
  return o.str();
}

std::string table_json(const TableReport& t) {
  std::ostringstream o;
  o << "{\"name\":\"" << t.name << "\",\"csv\":\"" << t.csv << "\",\"runs\":[";
  for (size_t i = 0; i < t.runs.size(); ++i) {
    const auto& r = t.runs[i];
    o << (i ? "," : "") << "{\"line\":" << r.row.line << ",\"plan\":\"" << r.plan
      << "\",\"predicted_s\":" << r.predicted_s << ",\"measured_s\":" << r.measured_s
      << ",\"fits\":" << (r.fits ? "true" : "false") << "}";
  }
  o << "],\"jobs\":[";
  for (size_t i = 0; i < t.jobs.size(); ++i) {
    const auto& j = t.jobs[i];
    o << (i ? "," : "") << "{\"job\":\"" << j.key << "\",\"configs\":" << j.configs
      << ",\"tau\":" << (std::isfinite(j.tau) ? j.tau : 0) << ",\"regret\":" << j.regret << "}";
  }
  o << "]}";
  return o.str();
}

}  // namespace

namespace {

// What calibrate and validate-sim both take from their flags: iterations per plan, the seed,
// and progress lines on `err`.
LiveMeasureOptions measure_options(int warmup, int iterations, uint64_t seed, std::ostream& err) {
  LiveMeasureOptions o;
  o.warmup = warmup;
  o.iterations = iterations;
  o.seed = seed;
  o.progress = [&err](const std::string& line) { err << line << std::endl; };
  return o;
}

int run_validate_live(const ValidateArgs& args, std::ostream& out, std::ostream& err) {
  LiveValidationOptions o;
  static_cast<LiveMeasureOptions&>(o) = measure_options(args.warmup, args.iterations, args.seed, err);
  o.plans = args.plans;
  o.calibration = args.calibration;
  o.repeat = !args.no_repeat;
  o.pipelines = args.pipelines;
  o.drift_reference = args.drift_reference;
  o.traces = args.traces;
  o.git_sha = kGitSha;
  LiveValidation v;
  const NoiseWatch watch;
  try {
    v = validate_live(args.config, o);
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  // Without the second visit only the other processes' load is judged.
  const NoiseReport noise =
      watch.judge("step latency, second visit of every plan", v.repeat_pairs, noise_limits(args.noise));
  const std::string json = json_with_noise(live_validation_json(v), noise);
  if (!args.out.empty()) {
    std::ofstream f(args.out);
    f << json << "\n";
    if (!f) throw std::runtime_error("cannot write " + args.out);
  }
  out << (args.json ? json + "\n" : live_validation_table(v));
  return report_noise(noise, args.json, out, err);
}

}  // namespace

int run_calibrate(const CalibrateArgs& args, std::ostream& out, std::ostream& err) {
  LiveMeasureOptions o = measure_options(args.warmup, args.iterations, args.seed, err);
  o.mixed_plans = args.mixed_plans;
  o.passes = args.passes;
  o.drift_reference = !args.no_drift_reference;
  o.shape_pass = !args.no_shape_pass;
  o.pipeline_pass = !args.no_pipeline_pass;
  CalibrationFile c;
  std::vector<std::pair<double, double>> repeat_pairs;
  const NoiseWatch watch;
  try {
    c = calibrate_live(args.config, o, args.command_line, &repeat_pairs);
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  // A calibration from a machine too noisy to measure on is not written: every later
  // prediction would carry its noise.
  const NoiseReport noise = watch.judge("step latency of each uniform plan, pass to pass",
                                        repeat_pairs, noise_limits(args.noise));
  if (noise.refused()) {
    out << noise_line(noise);
    err << noise_warning(noise) << "no calibration written to " << args.out << "\n";
    return kExitTooNoisy;
  }
  const std::string text = calibration_to_yaml(c);
  // Written whole to a temporary name, then renamed: a killed run leaves no half file.
  const std::string tmp = args.out + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, args.out);
  out << "calibration of " << c.ranks << " " << c.launch << " ranks (" << c.backend << ", "
      << c.device << ") from " << c.plans << " plans, " << c.runtime.blocks.size()
      << " (block kind, strategy) rows -> " << args.out << "\n"
      << "  per-step overhead " << c.runtime.step_overhead_s * 1e3 << " ms, optimizer "
      << c.runtime.optimizer_s_per_param * 1e9 << " ns/parameter, "
      << c.runtime.redistribution_s * 1e3 << " ms per layout change (fit error "
      << 100 * c.overhead_fit_error << " % of the step)\n"
      << "  device '" << c.device_name << "': effective " << c.peak_flops / 1e9
      << " GFLOP/s"
      << (c.kernel_s > 0 ? ", " + std::to_string(c.kernel_s * 1e6) + " us per kernel" : "")
      << (c.kernel_s > 0 && c.collective_s >= 0
              ? ", " + std::to_string(c.collective_s * 1e6) + " us per collective"
              : "")
      << " (fit error " << 100 * c.compute_fit_error << " %)\n"
      << "  link '" << c.link_name << "': " << c.link_latency_s * 1e6 << " us per ring step, "
      << c.link_bandwidth / 1e9 << " GB/s (fit error " << 100 * c.comm_fit_error << " %)\n"
      << "  collectives and stage boundaries alone: " << c.collectives.size()
      << " timings; the collectives (not used) " << c.collective_latency_s * 1e6
      << " us per ring step, " << c.collective_bandwidth / 1e9 << " GB/s (fit error "
      << 100 * c.collective_fit_error << " %)\n";
  if (c.p2p_bandwidth > 0)
    out << "  stage boundaries alone (stage-to-stage transfers): " << c.p2p_latency_s * 1e6
        << " us + bytes / " << c.p2p_bandwidth / 1e9 << " GB/s (fit error "
        << 100 * c.p2p_fit_error << " %)\n";
  out << "  memory: " << c.runtime.memory_state_scale << " x state + "
      << c.runtime.memory_activation_scale << " x activations + "
      << c.runtime.memory_base_bytes / 1e6 << " MB (fit error " << 100 * c.memory_fit_error
      << " %)\n"
      << "  repartition: " << c.runtime.repartition_fixed_s * 1e3 << " ms + "
      << c.runtime.repartition_per_block_s * 1e3 << " ms per block + bytes / "
      << c.runtime.repartition_bandwidth / 1e9 << " GB/s (fit error "
      << 100 * c.repartition_fit_error << " %)\n"
      << "  step latency noise sigma " << c.runtime.noise_sigma << "\n";
  try {
    out << pipelines_against_simulator(c, args.config, args.seed);
  } catch (const std::invalid_argument& e) {
    err << "the pipelined plans against the simulator: " << e.what() << "\n";
  }
  return report_noise(noise, /*json=*/false, out, err);
}

namespace {

// Configurations of one model (2+ of them, any GPUs and batch): Kendall's τ of predicted
// against published throughput per GPU, and the regret of the simulator's pick (the published
// throughput of the published best over that of the simulator's best-predicted, minus 1).
struct ModelGroup {
  std::string model;
  std::vector<std::string> configs;
  double tau = 0, regret = 0;
};

std::vector<ModelGroup> model_groups(const std::vector<Row>& rows) {
  std::map<std::string, std::vector<const Row*>> by;
  for (const Row& r : rows) by[r.model].push_back(&r);
  std::vector<ModelGroup> out;
  for (const auto& [model, rs] : by) {
    if (rs.size() < 2) continue;
    ModelGroup g;
    g.model = model;
    std::vector<double> pred, pub;
    for (const Row* r : rs) {
      g.configs.push_back(r->name);
      pred.push_back(r->predicted_tf), pub.push_back(r->published_tf);
    }
    g.tau = kendall_tau(pred, pub);
    const size_t pick = std::max_element(pred.begin(), pred.end()) - pred.begin();
    g.regret = *std::max_element(pub.begin(), pub.end()) / pub[pick] - 1;
    out.push_back(g);
  }
  return out;
}

std::string model_groups_text(const std::vector<ModelGroup>& groups) {
  if (groups.empty()) return "";
  std::vector<double> tau, regret;
  for (const auto& g : groups) {
    if (std::isfinite(g.tau)) tau.push_back(g.tau);
    regret.push_back(g.regret);
  }
  auto or_dash = [](const std::vector<double>& v, double x) {
    return v.empty() ? std::string("-") : fixed(x, 2);
  };
  std::ostringstream o;
  o << groups.size() << " models with 2+ configurations: Kendall tau of predicted vs published "
    << "throughput median " << or_dash(tau, tau.empty() ? 0 : median(tau)) << ", min "
    << or_dash(tau, tau.empty() ? 0 : *std::min_element(tau.begin(), tau.end()))
    << "; the simulator's pick is slower than the published best by median "
    << fixed(100 * median(regret), 1) << " %, max "
    << fixed(100 * *std::max_element(regret.begin(), regret.end()), 1) << " %\n";
  for (const auto& g : groups) {
    o << "  " << g.model << ": " << g.configs.size() << " configs, tau "
      << (std::isfinite(g.tau) ? fixed(g.tau, 2) : std::string("-")) << ", pick slower by "
      << fixed(100 * g.regret, 1) << " %\n";
  }
  return o.str();
}

}  // namespace

int run_validate_sim(const ValidateArgs& args, std::ostream& out, std::ostream& err) {
  if (args.config.empty() == args.published.empty())
    throw BadInput("validate-sim: give either a live CONFIG or --published DIR (not both)");
  if (!args.config.empty()) return run_validate_live(args, out, err);
  std::vector<std::string> files;
  for (const auto& p : args.published) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.path().extension() == ".yaml") files.push_back(e.path().string());
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw BadInput("--published: no .yaml config found");
  std::vector<Row> rows;
  std::vector<TableReport> tables;
  for (const auto& f : files) {
    const ExperimentSpec spec = load_experiment(f);
    if (!spec.published.table.empty())
      tables.push_back(validate_table(f, spec));
    else
      rows.push_back(validate_one(f));
  }
  if (rows.empty()) {  // tables only
    if (args.json) {
      out << "{\"tables\":[";
      for (size_t i = 0; i < tables.size(); ++i) out << (i ? "," : "") << table_json(tables[i]);
      out << "]}\n";
    } else {
      for (const auto& t : tables) out << table_text(t);
    }
    return 0;
  }
  std::vector<double> abs_err;
  for (const auto& r : rows) abs_err.push_back(std::fabs(r.error));
  std::sort(abs_err.begin(), abs_err.end());
  const size_t n = abs_err.size();
  const double median = n % 2 ? abs_err[n / 2] : (abs_err[n / 2 - 1] + abs_err[n / 2]) / 2;
  const double worst = abs_err.back();
  double mean_err = 0;
  for (double e : abs_err) mean_err += e / n;
  int fit = 0, too_fast = 0;
  for (const auto& r : rows) fit += r.fits ? 1 : 0, too_fast += r.error > 0 ? 1 : 0;
  if (args.json) {
    out << "{\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? "," : "") << "{\"name\":\"" << r.name << "\",\"plan\":\"" << r.plan
          << "\",\"predicted_s\":" << r.predicted_s << ",\"published_s\":" << r.published_s
          << ",\"predicted_tflops\":" << r.predicted_tf << ",\"published_tflops\":" << r.published_tf
          << ",\"error\":" << r.error << ",\"peak_gib\":" << r.peak_gib
          << ",\"fits\":" << (r.fits ? "true" : "false") << ",\"source\":\"" << r.source << "\"}";
    }
    out << "],\"median_abs_error\":" << median << ",\"mean_abs_error\":" << mean_err
        << ",\"max_abs_error\":" << worst << ",\"too_fast\":" << too_fast
        << ",\"fit\":" << fit << ",\"configs\":" << rows.size() << ",\"models\":[";
    const std::vector<ModelGroup> groups = model_groups(rows);
    for (size_t i = 0; i < groups.size(); ++i) {
      const ModelGroup& g = groups[i];
      out << (i ? "," : "") << "{\"model\":\"" << g.model << "\",\"configs\":"
          << g.configs.size() << ",\"tau\":" << (std::isfinite(g.tau) ? g.tau : 0)
          << ",\"regret\":" << g.regret << "}";
    }
    out << "],\"tables\":[";
    for (size_t i = 0; i < tables.size(); ++i) out << (i ? "," : "") << table_json(tables[i]);
    out << "]}\n";
    return 0;
  }
  out << "config                     predicted  published  pred/pub  iter s (pred / pub)   peak GiB / cap  fits  plan\n";
  for (const auto& r : rows) {
    std::ostringstream l;
    l << std::left << std::setw(26) << r.name << " " << std::right << std::setw(7)
      << fixed(r.predicted_tf, 1) << " TF " << std::setw(7) << fixed(r.published_tf, 1) << " TF  "
      << std::setw(6) << fixed(r.predicted_tf / r.published_tf, 3) << "  " << std::setw(8)
      << fixed(r.predicted_s, 3) << " / " << std::setw(7)
      << (r.published_s > 0 ? fixed(r.published_s, 3) : std::string("-")) << "   " << std::setw(6)
      << fixed(r.peak_gib, 1) << " / " << std::setw(4) << fixed(r.capacity_gib, 0) << "  "
      << (r.fits ? "yes " : "NO  ") << "  " << r.plan;
    out << l.str() << "\n";
  }
  out << "\nthroughput per GPU, |predicted/published - 1| over " << n << " runs: median "
      << fixed(100 * median, 1) << " %, mean " << fixed(100 * mean_err, 1) << " %, max "
      << fixed(100 * worst, 1) << " %; too fast on " << too_fast << " of " << n << "; " << fit
      << " of " << rows.size() << " fit memory\n"
      << model_groups_text(model_groups(rows)) << "\nsources:\n";
  for (const auto& r : rows) out << "  " << r.name << ": " << r.source << "\n";
  for (const auto& t : tables) out << "\n" << table_text(t);
  return 0;
}

}  // namespace shardgym::cli
