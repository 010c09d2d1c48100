#include "experiments/calibrate_pipelines.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>
#include <stdexcept>

#include "analysis/stats.h"
#include "experiments/calibration_fit.h"
#include "experiments/config.h"

namespace shardgym::detail {
namespace {

// Per stage, its blocks' forward and backward time per micro-batch; the slowest stage's.
// `fwd`, `bwd`: per block, the whole step's (m micro-batches).
double slowest_stage_compute(const Plan& plan, int layers, const std::vector<double>& fwd,
                             const std::vector<double>& bwd) {
  const int m = std::max(1, plan.pipeline.micro_batches);
  double slowest = 0;
  int block = 0;
  for (int stage_layers : plan.pipeline.layers_per_stage(layers)) {
    double c = 0;
    for (int b = block; b < block + 2 * stage_layers && b < static_cast<int>(fwd.size()); ++b)
      c += fwd[b] + (b < static_cast<int>(bwd.size()) ? bwd[b] : 0.0);
    block += 2 * stage_layers;
    slowest = std::max(slowest, c / m);
  }
  return slowest;
}

// 1 − m · stage_compute / (step − optimizer); 0 where the schedule has no time.
double measured_bubble(int micro_batches, double stage_compute_s, double step_s,
                       double optimizer_s) {
  const double schedule = step_s - optimizer_s;
  return schedule > 0 ? 1 - micro_batches * stage_compute_s / schedule : 0.0;
}

// The pass's plans for a world of `world` ranks and a model of `layers` layers, built on
// `reference` (its blocks, pipeline replaced), in the order they are measured.
std::vector<Plan> pipeline_pass_plans(const Plan& reference, int world, int layers) {
  std::vector<Plan> plans;
  for (int p = 2; p <= std::min(world, layers); ++p) {
    if (world % p != 0) continue;
    for (Schedule schedule : {Schedule::k1F1B, Schedule::kGPipe})
      for (int m : {1, 2, 4}) {
        Plan plan = reference;
        plan.pipeline = Pipeline{};
        plan.pipeline.stages = p;
        plan.pipeline.micro_batches = m;
        plan.pipeline.schedule = schedule;
        plans.push_back(plan);
      }
  }
  return plans;
}

// The boundary walk's plans: `start` (2 stages), then its boundary moved +1, −2, +1, −1, +2, −1
// layers, each step kept where the plan is valid and both runs can train it.
std::vector<Plan> boundary_walk(const Plan& start, const TrainingRun& run, const SimRun& sim,
                                int layers) {
  std::vector<Plan> walk = {start};
  for (int delta : {1, -2, 1, -1, 2, -1}) {
    Plan next = walk.back();
    next.pipeline = next.pipeline.moved(0, delta, layers);
    if (!next.validate(run.model(), run.cluster().world_size()).empty()) continue;
    if (run.fits(next) && sim.fits(next)) walk.push_back(next);
  }
  return walk;
}

// The boundary walk (PipelinePass::moves): from the first 2-stage plan of the pass, each move
// measured as the pass's plans are; with reference_s > 0 every time divided by the mean of
// the drift reference before the walk (`before`, the pass's last) and after it.
void measure_boundary_walk(const Stepper& step, const TrainingRun& run, const SimRun& sim,
                           const Plan& reference, double reference_s, double before, int layers,
                           const LiveMeasureOptions& o, PipelinePass& pass) {
  const auto start = std::find_if(pass.plans.begin(), pass.plans.end(),
                                  [](const Plan& p) { return p.pipeline.stages == 2; });
  if (start == pass.plans.end()) return;
  const std::vector<Plan> walk = boundary_walk(*start, run, sim, layers);
  if (walk.size() < 2) return;
  LiveMeasureOptions quiet = o;
  quiet.progress = nullptr;
  measure(step, walk.front(), quiet);  // entered from the reference: not a boundary move
  for (size_t i = 1; i < walk.size(); ++i) {
    PlanStats s = measure(step, walk[i], quiet);
    s.from = walk[i - 1];
    pass.moves.push_back(std::move(s));
    pass.move_plans.push_back(walk[i]);
  }
  if (reference_s > 0) {
    LiveMeasureOptions ref_o = o;
    ref_o.warmup = 1, ref_o.iterations = 3;
    const double after = measure(step, reference, ref_o).step_s;
    for (PlanStats& s : pass.moves) s.scale_times((before + after) / 2 / reference_s);
  }
  if (o.progress) {
    std::ostringstream line;
    line << "pipeline pass: " << pass.moves.size() << " boundary moves of "
         << walk.front().to_string() << ", into the repartition fit; each (ms):";
    for (const PlanStats& s : pass.moves)
      line << " " << std::fixed << std::setprecision(2) << s.repartition_s * 1e3;
    o.progress(line.str());
  }
}

}  // namespace

PipelinePass measure_pipelines(const Stepper& step, const TrainingRun& run, const SimRun& sim,
                               const Plan& reference, double reference_s, int layers,
                               const LiveMeasureOptions& o) {
  PipelinePass pass;
  std::vector<Plan>& plans = pass.plans;
  for (const Plan& p : pipeline_pass_plans(reference, run.cluster().world_size(), layers))
    if (run.fits(p) && sim.fits(p)) plans.push_back(p);
  LiveMeasureOptions ref_o = o;
  ref_o.warmup = 1, ref_o.iterations = 3;
  const bool drift = reference_s > 0;
  double before = drift ? measure(step, reference, ref_o).step_s : 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    PlanStats s = measure(step, plan, o);
    if (drift) {
      const double after = measure(step, reference, ref_o).step_s;
      s.scale_times((before + after) / 2 / reference_s);
      before = after;
    }
    CalibrationFile::PipelineTiming t;
    t.plan = plan.to_string();
    t.step_s = s.step_s;
    t.optimizer_s = s.optimizer_s;
    t.stage_compute_s = slowest_stage_compute(plan, layers, s.fwd, s.bwd);
    t.bubble =
        measured_bubble(plan.pipeline.micro_batches, t.stage_compute_s, t.step_s, t.optimizer_s);
    pass.timings.push_back(t);
    pass.stats.push_back(s);
    if (o.progress) {
      std::ostringstream line;
      line << "pipeline pass [" << (i + 1) << "/" << plans.size() << "] " << t.plan << ": step "
           << std::fixed << std::setprecision(2) << t.step_s * 1e3 << " ms (spread "
           << std::setprecision(0) << 100 * s.spread << " %), slowest stage "
           << std::setprecision(2) << t.stage_compute_s * 1e3 << " ms a micro-batch, bubble "
           << std::setprecision(3) << t.bubble;
      o.progress(line.str());
    }
  }
  measure_boundary_walk(step, run, sim, reference, reference_s, before, layers, o, pass);
  return pass;
}

// The pipeline pass's stages against the device fit (out of sample) and against a fit that
// took them in too (not used): per micro-batch count, the median of predicted / measured − 1
// over the blocks' compute (a point per block kind and plan).
void report_staged_fit(const DeviceFit& without, const DeviceFit& with,
                       const std::vector<ComputePoint>& staged, const std::vector<int>& staged_m,
                       const LiveMeasureOptions& o) {
  if (!o.progress) return;
  const auto predict = [](const DeviceFit& f, const ComputePoint& p) {
    return p.physics / f.speed + p.kernels * f.kernel_s + p.collectives * f.collective_s;
  };
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_m;
  for (size_t i = 0; i < staged.size(); ++i) {
    by_m[staged_m[i]].first.push_back(predict(without, staged[i]) / staged[i].measured - 1);
    by_m[staged_m[i]].second.push_back(predict(with, staged[i]) / staged[i].measured - 1);
  }
  std::ostringstream line;
  line << std::fixed << std::setprecision(1)
       << "device fit: the pipeline pass's stages (blocks' compute per micro-batch) against the "
          "fit (out of sample) / a fit with them too (not used):";
  for (const auto& [m, errs] : by_m)
    line << " m=" << m << " " << std::showpos << 100 * median(errs.first) << " / "
         << 100 * median(errs.second) << std::noshowpos << " %";
  line << "; fit error " << 100 * without.fit_error << " / " << 100 * with.fit_error << " %, "
       << std::setprecision(1) << without.kernel_s * 1e6 << " / " << with.kernel_s * 1e6
       << " us per kernel, " << std::setprecision(2) << without.speed << " / " << with.speed
       << " x the catalog's speed";
  o.progress(line.str());
}

}  // namespace shardgym::detail

namespace shardgym {

std::string pipelines_against_simulator(const CalibrationFile& c, const std::string& config,
                                        uint64_t seed) {
  if (c.pipelines.empty()) return "";
  ExperimentSpec spec = detail::sim_spec_of(load_experiment(config));
  const std::string why = apply_calibration(c, "(this calibration)", spec.cluster);
  if (!why.empty())
    throw std::invalid_argument("the calibration does not fit " + config + ": " + why);
  const int blocks = spec.model.num_blocks(), layers = spec.model.layers;
  const bool serial = spec.cluster.calibration.serial_host;
  SimRun sim(spec);
  std::ostringstream o;
  o << "  the schedule's fill and drain: pipelined uniform plans, live against this calibration's\n"
       "  simulator (the step; the slowest stage's blocks per micro-batch, which the device fit\n"
       "  did not see), and the bubble measured, 1 - m * stage / (step - optimizer), against\n"
       "  (p - 1) / (m + p - 1):\n"
    << "    plan                                 step: live ms  sim ms   error   stage: live ms"
       "  sim ms   error   bubble  formula\n";
  std::map<int, std::vector<double>> by_m, stage_by_m;
  for (const CalibrationFile::PipelineTiming& t : c.pipelines) {
    const Plan plan = Plan::parse(t.plan, blocks);
    sim.reset(seed, plan);
    const IterationBreakdown bd = sim.breakdown(plan);
    const int p = plan.pipeline.stages, mb = std::max(1, plan.pipeline.micro_batches);
    // The simulator's figures as the live ones are taken: each stage's blocks, on CPU ranks
    // with their kernels' issue (the rank's thread does it itself, CostModel::with_host).
    std::vector<double> fwd, bwd;
    for (const BlockCost& b : bd.blocks) {
      fwd.push_back(mb * (b.fwd_s + (serial ? b.host_s : 0.0)));
      bwd.push_back(mb * b.bwd_s);
    }
    const double step = bd.step_latency_s;
    const double stage = detail::slowest_stage_compute(plan, layers, fwd, bwd);
    const double err = t.step_s > 0 ? step / t.step_s - 1 : 0.0;
    const double stage_err = t.stage_compute_s > 0 ? stage / t.stage_compute_s - 1 : 0.0;
    by_m[mb].push_back(err), stage_by_m[mb].push_back(stage_err);
    o << "    " << std::left << std::setw(37) << t.plan << std::right << std::fixed
      << std::setprecision(2) << std::setw(14) << t.step_s * 1e3 << std::setw(8) << step * 1e3
      << std::setw(6) << std::setprecision(1) << 100 * err << " %" << std::setprecision(2)
      << std::setw(17) << t.stage_compute_s * 1e3 << std::setw(8) << stage * 1e3 << std::setw(6)
      << std::setprecision(1) << 100 * stage_err << " %" << std::setprecision(3) << std::setw(9)
      << t.bubble << std::setw(9) << double(p - 1) / double(mb + p - 1) << "\n";
  }
  for (const auto* errs : {&by_m, &stage_by_m}) {
    o << (errs == &by_m ? "  median error by micro-batch count, step:"
                        : "  median error by micro-batch count, slowest stage:");
    for (const auto& [mb, e] : *errs)
      o << " m=" << mb << " " << std::showpos << std::fixed << std::setprecision(1)
        << 100 * median(e) << std::noshowpos << " %";
    o << "\n";
  }
  return o.str();
}

}  // namespace shardgym
