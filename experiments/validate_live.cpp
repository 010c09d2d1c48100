// `validate-sim` on the live run: validate_live, its table and JSON (experiments/calibrate.h).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>

#include "analysis/stats.h"
#include "datasets/trace.h"
#include "datasets/trace_writer.h"
#include "env/partition_env.h"
#include "env/registry.h"
#include "env/share_action.h"
#include "experiments/calibrate.h"
#include "experiments/config.h"
#include "experiments/live_measure.h"
#include "runtime/core/live_memory.h"
#include "runtime/sim/sim_run.h"

namespace shardgym {

using namespace detail;

namespace {

void check_options(const LiveValidationOptions& o, const ExperimentSpec& spec,
                   const std::string& config) {
  if (o.warmup < 1) throw std::invalid_argument("--warmup must be at least 1");
  if (o.iterations < 1) throw std::invalid_argument("--iterations must be at least 1");
  if (o.plans < 2) throw std::invalid_argument("--plans must be at least 2 (τ needs a ranking)");
  if (o.pipelines && !o.traces.empty())
    throw std::invalid_argument(
        "--traces records env steps; --pipelines steps the runs "
        "directly (their stage counts change between plans)");
  if (o.pipelines && spec.data_share_groups > 0)
    throw std::invalid_argument("--pipelines: " + config +
                                " has data-share groups; live ranks run shares without stages");
}

// The machine's speed against the calibration's (o.drift_reference): the calibration's
// reference plan and its median step there, when the file records them.
struct DriftReference {
  Plan plan;
  double calibrated_s = 0;  // 0: none
};

DriftReference drift_reference_of(const std::string& calibration, int blocks) {
  DriftReference r;
  const CalibrationFile file = load_calibration_file(calibration);
  if (!file.drift_reference.empty() && file.drift_reference_s > 0) {
    r.plan = Plan::parse(file.drift_reference, blocks);
    r.calibrated_s = file.drift_reference_s;
  }
  return r;
}

// With data-share groups (`data_shares: {groups: n}`) the plans' shares walk too, as the
// env moves them: each plan change is either a share move (one random share choice:
// even, balanced, a group left out, one sequence moved; the blocks in force narrowed where
// the new shares need it, env/share_action.h) or a block move (the drawn blocks, narrowed to
// the shares in force), half of each. A move that either run cannot train is drawn again,
// at most 100 times; then the drawn blocks narrowed to the shares in force.
void walk_data_shares(const ExperimentSpec& spec, const ExperimentSpec& sspec, uint64_t seed,
                      TrainingRun& live_run, TrainingRun& sim_run, std::vector<Plan>& plans) {
  const int groups = spec.data_share_groups;
  const int batch = effective_global_batch(spec.model, spec.cluster.world_size());
  const std::vector<double> speeds = share_group_speeds(groups, sspec.cluster, 1, {}, {});
  std::mt19937_64 rng(seed ^ 0x5eedULL);
  auto trained = [&](const Plan& p) -> std::optional<Plan> {
    std::optional<Plan> a = admitted_with_shares(sim_run, p);
    if (a && plan_fits(live_run, *a)) return a;
    return std::nullopt;
  };
  for (size_t i = 1; i < plans.size(); ++i) {
    const Plan& prev = plans[i - 1];
    Plan blocks_move = plans[i];
    blocks_move.pipeline.shares = prev.pipeline.shares;
    std::optional<Plan> chosen;
    for (int attempt = 0; attempt < 100 && !chosen; ++attempt) {
      if (rng() % 2 == 0) {
        chosen = trained(blocks_move);
      } else {
        Plan share_move = prev;
        share_move.pipeline.shares = apply_share_choice(
            prev.pipeline.shares, static_cast<int>(rng() % share_choices(groups)), groups, batch,
            speeds);
        if (share_move.pipeline.shares != prev.pipeline.shares) chosen = trained(share_move);
      }
    }
    if (!chosen) chosen = trained(blocks_move);
    if (!chosen)
      throw std::invalid_argument("validate-sim: plan " + plans[i].to_string() +
                                  " does not train with the shares of " + prev.to_string() +
                                  " on both runs");
    plans[i] = *chosen;
  }
}

// Steps `env` into a plan through its own encoding (with the plan-level choice toward the
// plan's shares where the env has one; the blocks alone for an env without it), recording
// the step to `trace` while `recording` holds.
Stepper env_stepper(Env& env, TraceWriter* trace, const bool& recording, int blocks) {
  return [&env, trace, &recording, blocks](const Plan& p) {
    Action a(blocks);
    if (auto* pe = dynamic_cast<PartitionEnv*>(&env)) {
      a = pe->action_from_plan(p);
    } else {
      for (int b = 0; b < blocks; ++b) {
        a[b] = env.run().catalog().index_of(p.blocks[b]);
        if (a[b] < 0)
          throw std::invalid_argument("plan " + p.to_string() + ": " + p.blocks[b].to_string() +
                                      " is not in the catalog of " + env.spec().id);
      }
    }
    StepResult r;
    try {
      r = env.step(a);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(e.what()) + " (from plan " +
                                  env.run().plan().to_string() + " to " + p.to_string() + ")");
    }
    if (trace && recording) trace->record_step(a, r);
    return r.info.measurement;
  };
}

// --traces PREFIX: PREFIX + suffix for one of the two runs (none without --traces).
std::shared_ptr<TraceWriter> open_trace(const LiveValidationOptions& o, const char* suffix,
                                        const ExperimentSpec& spec) {
  if (o.traces.empty()) return nullptr;
  auto w = std::make_shared<TraceWriter>(o.traces + suffix, make_trace_metadata(spec, o.git_sha));
  w->set_agent("validate-sim");
  return w;
}

// --pipelines: plan to plan on the run itself.
Stepper run_stepper(TrainingRun& run) {
  return [&run](const Plan& p) { return run.step(p); };
}

// One plan measured live (`s`) beside the simulator's repartition into it (`first`) and an
// iteration in it (`pred`, noise-free).
PlanComparison compare_plan(const ExperimentSpec& spec, const Plan& plan, const PlanStats& s,
                            const Measurement& first, const Measurement& pred) {
  PlanComparison c;
  const int world = spec.live.ranks;
  const std::vector<MemoryEstimate> stages = live_stage_memory_estimates(
      spec.model, plan, world, plan_micro_batches(plan, spec.model, world));
  // The framework's workspaces (DeviceType::workspace_bytes) beside the model's tensors.
  const double workspace = spec.cluster.max_workspace_bytes();
  for (int r = 0; r < world; ++r)
    c.estimate_rank_peak_bytes.push_back(
        stages[std::min(stages.size() - 1, size_t(r) * stages.size() / size_t(world))].total() +
        workspace);
  c.plan = plan.to_string();
  c.stages = plan.pipeline.stages, c.micro_batches = std::max(1, plan.pipeline.micro_batches);
  c.live_step_s = s.step_s, c.sim_step_s = pred.step_latency_s, c.live_spread = s.spread;
  c.live_peak_bytes = s.peak_bytes;
  for (double p : pred.peak_memory_bytes) c.sim_peak_bytes = std::max(c.sim_peak_bytes, p);
  c.live_rank_peak_bytes = s.rank_peak_bytes, c.sim_rank_peak_bytes = pred.peak_memory_bytes;
  c.live_repartition_s = s.repartition_s, c.sim_repartition_s = first.repartition_s;
  c.live_repartition_bytes = s.repartition_bytes, c.sim_repartition_bytes = first.repartition_bytes;
  c.live_repartition_peak_bytes = s.repartition_peak_bytes;
  c.sim_repartition_peak_bytes = first.repartition_peak_bytes;
  c.live_fwd = s.fwd, c.live_bwd = s.bwd, c.live_comm = s.comm;
  c.sim_fwd = pred.block_fwd_s, c.sim_bwd = pred.block_bwd_s, c.sim_comm = pred.block_comm_s;
  return c;
}

void report_plan(const LiveMeasureOptions& o, size_t i, size_t n, const PlanComparison& c) {
  if (!o.progress) return;
  std::ostringstream line;
  line << "[" << (i + 1) << "/" << n << "] live " << std::fixed << std::setprecision(2)
       << c.live_step_s * 1e3 << " ms, sim " << c.sim_step_s * 1e3 << " ms (" << std::showpos
       << std::setprecision(1) << 100 * (c.sim_step_s / c.live_step_s - 1) << std::noshowpos
       << " %)";
  o.progress(line.str());
}

// Pipelined plans' signed step error grouped by their micro-batch count (docs/calibration.md:
// the quiet hosts' simulator was too fast at m = 1 and too slow at m = 4).
void step_by_micro_batches(LiveValidation& v) {
  std::map<int, std::vector<double>> by_m;
  for (const PlanComparison& c : v.plans)
    if (c.stages > 1 && c.live_step_s > 0)
      by_m[c.micro_batches].push_back(c.sim_step_s / c.live_step_s - 1);
  v.step_by_micro_batches.clear();
  for (const auto& [m, errs] : by_m)
    v.step_by_micro_batches.push_back({m, median(errs), static_cast<int>(errs.size())});
}

// The error summaries and τ over the compared plans. A repartition counts from the second
// plan on, where the live run moved bytes into it.
void summarize_plans(LiveValidation& v) {
  std::vector<double> step_err, fwd_err, bwd_err, comm_err, mem_err, rep_err, repb_err, repm_err;
  std::vector<double> rank_err, estimate_err;
  std::vector<double> spreads, live_steps, sim_steps;
  for (size_t i = 0; i < v.plans.size(); ++i) {
    const PlanComparison& c = v.plans[i];
    step_err.push_back(rel_error(c.sim_step_s, c.live_step_s));
    mem_err.push_back(rel_error(c.sim_peak_bytes, c.live_peak_bytes));
    for (size_t r = 0; r < c.live_rank_peak_bytes.size(); ++r) {
      if (r < c.sim_rank_peak_bytes.size())
        rank_err.push_back(rel_error(c.sim_rank_peak_bytes[r], c.live_rank_peak_bytes[r]));
      if (r < c.estimate_rank_peak_bytes.size())
        estimate_err.push_back(rel_error(c.estimate_rank_peak_bytes[r], c.live_rank_peak_bytes[r]));
    }
    if (i > 0 && c.live_repartition_bytes > 0) {
      rep_err.push_back(rel_error(c.sim_repartition_s, c.live_repartition_s));
      repb_err.push_back(rel_error(c.sim_repartition_bytes, c.live_repartition_bytes));
      repm_err.push_back(rel_error(c.sim_repartition_peak_bytes, c.live_repartition_peak_bytes));
    }
    for (size_t b = 0; b < c.live_fwd.size(); ++b) {
      fwd_err.push_back(rel_error(c.sim_fwd[b], c.live_fwd[b]));
      bwd_err.push_back(rel_error(c.sim_bwd[b], c.live_bwd[b]));
      comm_err.push_back(rel_error(c.sim_comm[b], c.live_comm[b]));
    }
    spreads.push_back(c.live_spread);
    live_steps.push_back(c.live_step_s);
    sim_steps.push_back(c.sim_step_s);
  }
  v.step = summarize(step_err);
  v.fwd = summarize(fwd_err);
  v.bwd = summarize(bwd_err);
  v.comm = summarize(comm_err);
  v.memory = summarize(mem_err);
  v.rank_memory = summarize(rank_err);
  v.rank_memory_estimate = summarize(estimate_err);
  v.repartition_s = summarize(rep_err);
  v.repartition_bytes = summarize(repb_err);
  v.repartition_peak = summarize(repm_err);
  v.kendall_tau = kendall_tau(live_steps, sim_steps);
  v.live_spread_median = median(spreads);
  step_by_micro_batches(v);
}

// The speed factor of plan i, interpolated between the references before and after the pass,
// and the step errors with the live steps divided by it: what is left once the machine's
// speed is back to the calibration's. A drift faster than the whole pass stays in.
void at_calibration_speed(LiveValidation& v) {
  const double f0 = v.reference_before_s / v.calibrated_reference_s;
  const double f1 = v.reference_after_s / v.calibrated_reference_s;
  std::vector<double> err, live_at_speed, sim_steps;
  for (size_t i = 0; i < v.plans.size(); ++i) {
    const double t = v.plans.size() > 1 ? double(i) / double(v.plans.size() - 1) : 0.0;
    const double live_s = v.plans[i].live_step_s / (f0 + (f1 - f0) * t);
    err.push_back(rel_error(v.plans[i].sim_step_s, live_s));
    live_at_speed.push_back(live_s);
    sim_steps.push_back(v.plans[i].sim_step_s);
  }
  v.step_at_calibration_speed = summarize(err);
  v.kendall_tau_at_calibration_speed = kendall_tau(live_at_speed, sim_steps);
}

// The live run against itself: every plan again, in the same order. What the simulator's
// errors and τ can be at best, given how much the live run varies between visits.
void repeat_pass(LiveValidation& v, const std::vector<Plan>& plans, const Stepper& live_step,
                 const Stepper& live_plain, const ExperimentSpec& spec, const TrainingRun& sim_run,
                 const LiveValidationOptions& o) {
  std::vector<double> first, again, diff;
  // The walk's first plan may not be one move from its last (shares that leave a group out
  // admit no block spanning it): as the walk does, shares first (the blocks in force
  // narrowed where needed), unmeasured, then the first plan's blocks.
  if (spec.data_share_groups > 0 && plans.back().pipeline.shares != plans.front().pipeline.shares) {
    Plan bridge = plans.back();
    bridge.pipeline.shares = plans.front().pipeline.shares;
    if (const std::optional<Plan> a = admitted_with_shares(sim_run, bridge)) live_plain(*a);
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    const PlanStats s = measure(live_step, plans[i], o);
    const double before = v.plans[i].live_step_s;
    first.push_back(before);
    again.push_back(s.step_s);
    diff.push_back(rel_error(s.step_s, before));
    v.repeat_pairs.emplace_back(before, s.step_s);
    if (o.progress && (i + 1) % 10 == 0)
      o.progress("repeat pass: " + std::to_string(i + 1) + "/" + std::to_string(plans.size()));
  }
  v.repeat = summarize(diff);
  v.repeat_tau = kendall_tau(first, again);
}

}  // namespace

LiveValidation validate_live(const std::string& config, const LiveValidationOptions& o) {
  // The plans are drawn first (the simulator says which fit memory), so that both runs can
  // start from the first of them.
  ExperimentSpec spec = load_experiment(config);
  check_options(o, spec, config);
  ExperimentSpec sspec = sim_spec_of(spec);
  LiveValidation v;
  v.config = config;
  v.ranks = spec.cluster.world_size();
  v.launch = spec.live.launch;
  if (!o.calibration.empty()) {
    const CalibrationFile file = load_calibration_file(o.calibration);
    const std::string why = apply_calibration(file, o.calibration, sspec.cluster);
    if (!why.empty())
      throw std::invalid_argument(o.calibration + " does not fit " + config + ": " + why);
  }
  v.calibration = sspec.cluster.calibration.path;
  const int blocks = spec.model.num_blocks();
  const DriftReference reference = o.drift_reference && !v.calibration.empty()
                                       ? drift_reference_of(v.calibration, blocks)
                                       : DriftReference{};
  std::vector<Plan> plans;
  if (!o.pipelines) {
    const SimRun draw(sspec);
    std::mt19937_64 rng(o.seed);
    plans = random_plans(draw.catalog(), blocks, o.plans, rng, draw);
    spec.initial_plan = sspec.initial_plan = plans.front().to_string();
  }
  LiveSetup live = open_live(spec, config);
  std::unique_ptr<Env> sim_env = make_bare_env(kSimEnv, sspec);
  TrainingRun& live_run = live.env->run();
  TrainingRun& sim_run = sim_env->run();
  if (o.pipelines) {  // drawn once the live run can say which plans it trains
    std::mt19937_64 rng(o.seed);
    plans = random_pipelined_plans(
        sim_run.catalog(), spec.model, spec.cluster.world_size(), o.plans, rng,
        [&](const Plan& p) { return plan_fits(live_run, p) && plan_fits(sim_run, p); });
  }
  if (spec.data_share_groups > 0) walk_data_shares(spec, sspec, o.seed, live_run, sim_run, plans);

  // Both runs step through their bare envs (an env step is its run's step plus the
  // observation), so that --traces can record them: every iteration of the first pass, warm-up
  // included, live and simulated, the same plans step for step (the repeat pass is not recorded).
  const std::shared_ptr<TraceWriter> live_trace = open_trace(o, ".live.h5", spec);
  const std::shared_ptr<TraceWriter> sim_trace = open_trace(o, ".sim.h5", sspec);
  bool recording = true;
  const Stepper live_step = o.pipelines
                                ? run_stepper(live_run)
                                : env_stepper(*live.env, live_trace.get(), recording, blocks);
  const Stepper sim_step = o.pipelines ? run_stepper(sim_run)
                                       : env_stepper(*sim_env, sim_trace.get(), recording, blocks);
  const Stepper live_plain =
      o.pipelines ? live_step : env_stepper(*live.env, nullptr, recording, blocks);
  ResetResult live_reset, sim_reset;
  if (o.pipelines) {
    live_run.reset(o.seed, plans.front());
    sim_run.reset(o.seed, plans.front());
  } else {
    live_reset = live.env->reset(o.seed);
    sim_reset = sim_env->reset(o.seed);
  }
  LiveMeasureOptions ref_o = o;
  ref_o.warmup = 1, ref_o.iterations = 3;  // as calibrate measures it
  if (reference.calibrated_s > 0) {
    // Not in the traces: the live run then goes back to the first plan, where both traces
    // begin (its repartition is not compared).
    v.reference_before_s = measure(live_plain, reference.plan, ref_o).step_s;
  }
  if (live_trace) {
    live_trace->begin_episode(live.env->spec(), o.seed, live_reset);
    sim_trace->begin_episode(sim_env->spec(), o.seed, sim_reset);
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    const PlanStats s = measure(live_step, plan, o);
    const Measurement first = sim_step(plan);  // the repartition into this plan
    const Measurement pred = sim_step(plan);   // an iteration in it (noise-free)
    // The trace's remaining iterations (the simulator's are all `pred`).
    for (int k = 2; k < o.warmup + o.iterations && sim_trace; ++k) sim_step(plan);
    v.plans.push_back(compare_plan(spec, plan, s, first, pred));
    report_plan(o, i, plans.size(), v.plans.back());
  }
  summarize_plans(v);
  if (live_trace) {
    live_trace->end_episode();
    sim_trace->end_episode();
    recording = false;
  }
  if (reference.calibrated_s > 0) {
    v.reference = reference.plan.to_string();
    v.calibrated_reference_s = reference.calibrated_s;
    v.reference_after_s = measure(live_plain, reference.plan, ref_o).step_s;
    at_calibration_speed(v);
  }
  if (o.repeat) repeat_pass(v, plans, live_step, live_plain, spec, sim_run, o);
  return v;
}

namespace {

struct NamedError {
  const char* table;  // row name in the table
  const char* json;   // key in the JSON
  const ErrorSummary* error;
};

// The error figures of a validation, in the order the table and the JSON list them.
std::vector<NamedError> error_figures(const LiveValidation& v) {
  return {{"step", "step", &v.step},
          {"block fwd", "block_fwd", &v.fwd},
          {"block bwd", "block_bwd", &v.bwd},
          {"block comm", "block_comm", &v.comm},
          {"peak memory", "peak_memory", &v.memory},
          {"rank peaks", "rank_peak_memory", &v.rank_memory},
          {"rank est.", "rank_peak_memory_estimate", &v.rank_memory_estimate},
          {"repart. s", "repartition_s", &v.repartition_s},
          {"repart. B", "repartition_bytes", &v.repartition_bytes},
          {"repart. peak", "repartition_peak_bytes", &v.repartition_peak},
          {"live again", "live_repeat_step", &v.repeat}};
}

// A JSON array of numbers.
std::string numbers(const std::vector<double>& xs) {
  std::ostringstream o;
  o.precision(15);  // bytes: every digit
  const char* sep = "[";
  for (double x : xs) o << sep << x, sep = ", ";
  o << (xs.empty() ? "[]" : "]");
  return o.str();
}

}  // namespace

std::string live_validation_table(const LiveValidation& v) {
  std::ostringstream o;
  o << "simulator " << (v.calibration.empty() ? "uncalibrated" : "calibrated by " + v.calibration)
    << " against the live run of " << v.config << " (" << v.ranks << " ranks, " << v.launch << "), "
    << v.plans.size() << " random plans\n\n";
  o << std::left << std::setw(13) << "figure" << std::right << std::setw(10) << "median"
    << std::setw(10) << "p90" << std::setw(8) << "n"
    << "   (|sim / live − 1|)\n";
  auto row = [&](const char* name, const ErrorSummary& e) {
    o << std::left << std::setw(13) << name << std::right << std::fixed << std::setprecision(1)
      << std::setw(9) << 100 * e.median << "%" << std::setw(9) << 100 * e.p90 << "%" << std::setw(8)
      << e.n << "\n";
  };
  for (const NamedError& f : error_figures(v))
    if (f.error != &v.repeat || v.repeat.n > 0) row(f.table, *f.error);
  o << "(peak memory: the fullest rank; rank peaks: every rank; rank est.: the live ranks'\n"
    << " analytic estimate, runtime/core/live_memory.h, against every rank)\n";
  o << std::setprecision(3) << "Kendall tau of the plans' step latencies: " << v.kendall_tau;
  if (v.repeat.n > 0) o << " (live against itself, second visit: " << v.repeat_tau << ")";
  if (!v.step_by_micro_batches.empty()) {
    o << "\nstep by micro-batch count (median of sim / live − 1, signed; plans):";
    for (const auto& g : v.step_by_micro_batches)
      o << " m=" << g.micro_batches << " " << std::showpos << std::fixed << std::setprecision(1)
        << 100 * g.median << std::noshowpos << " % (" << g.n << ")";
  }
  o << std::setprecision(3)
    << "\nlive run-to-run spread of the step latency ((p90 - p10) / median, median over plans): "
    << std::setprecision(1) << 100 * v.live_spread_median << "%\n";
  if (!v.reference.empty()) {
    o << std::setprecision(2) << "machine speed against the calibration: " << v.reference
      << " took " << v.reference_before_s * 1e3 << " ms before the first plan and "
      << v.reference_after_s * 1e3
      << " ms after the last (calibration: " << v.calibrated_reference_s * 1e3
      << " ms); live steps divided by that factor:\n";
    row("step (speed)", v.step_at_calibration_speed);
    o << std::setprecision(3)
      << "Kendall tau at the calibration's speed: " << v.kendall_tau_at_calibration_speed << "\n";
  }
  return o.str();
}

std::string live_validation_json(const LiveValidation& v) {
  std::ostringstream o;
  o << std::setprecision(9);
  auto err = [&](const char* name, const ErrorSummary& e) {
    o << "\"" << name << "\": {\"median\": " << e.median << ", \"p90\": " << e.p90
      << ", \"n\": " << e.n << "}, ";
  };
  o << "{\"config\": \"" << v.config << "\", \"calibration\": \"" << v.calibration
    << "\", \"ranks\": " << v.ranks << ", \"launch\": \"" << v.launch << "\", ";
  for (const NamedError& f : error_figures(v)) err(f.json, *f.error);
  o << "\"live_repeat_tau\": " << v.repeat_tau << ", ";
  if (!v.reference.empty()) {
    o << "\"drift_reference\": \"" << v.reference
      << "\", \"calibrated_reference_s\": " << v.calibrated_reference_s
      << ", \"reference_before_s\": " << v.reference_before_s
      << ", \"reference_after_s\": " << v.reference_after_s << ", ";
    err("step_at_calibration_speed", v.step_at_calibration_speed);
    o << "\"kendall_tau_at_calibration_speed\": " << v.kendall_tau_at_calibration_speed << ", ";
  }
  o << "\"step_by_micro_batches\": [";
  for (size_t i = 0; i < v.step_by_micro_batches.size(); ++i) {
    const auto& g = v.step_by_micro_batches[i];
    o << (i ? ", " : "") << "{\"micro_batches\": " << g.micro_batches
      << ", \"signed_median\": " << g.median << ", \"n\": " << g.n << "}";
  }
  o << "], ";
  o << "\"kendall_tau\": " << v.kendall_tau << ", \"live_spread_median\": " << v.live_spread_median
    << ", \"plans\": [";
  for (size_t i = 0; i < v.plans.size(); ++i) {
    const PlanComparison& c = v.plans[i];
    o << (i ? ", " : "") << "{\"plan\": \"" << c.plan << "\", \"live_step_s\": " << c.live_step_s
      << ", \"sim_step_s\": " << c.sim_step_s << ", \"live_spread\": " << c.live_spread
      << ", \"live_peak_bytes\": " << c.live_peak_bytes
      << ", \"sim_peak_bytes\": " << c.sim_peak_bytes
      << ", \"live_rank_peak_bytes\": " << numbers(c.live_rank_peak_bytes)
      << ", \"sim_rank_peak_bytes\": " << numbers(c.sim_rank_peak_bytes)
      << ", \"estimate_rank_peak_bytes\": " << numbers(c.estimate_rank_peak_bytes)
      << ", \"live_repartition_s\": " << c.live_repartition_s
      << ", \"sim_repartition_s\": " << c.sim_repartition_s
      << ", \"live_repartition_bytes\": " << c.live_repartition_bytes
      << ", \"sim_repartition_bytes\": " << c.sim_repartition_bytes
      << ", \"live_repartition_peak_bytes\": " << c.live_repartition_peak_bytes
      << ", \"sim_repartition_peak_bytes\": " << c.sim_repartition_peak_bytes << "}";
  }
  o << "]}";
  return o.str();
}

}  // namespace shardgym
