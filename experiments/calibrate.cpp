#include "experiments/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <sys/utsname.h>

#include "analysis/stats.h"
#include "datasets/trace.h"
#include "datasets/trace_writer.h"
#include "env/registry.h"
#include "experiments/calibrate_alone.h"
#include "experiments/calibrate_pipelines.h"
#include "experiments/calibrate_repartition.h"
#include "experiments/calibration_fit.h"
#include "experiments/config.h"
#include "experiments/live_measure.h"
#include "runtime/core/cost.h"
#include "runtime/sim/layout.h"
#include "runtime/sim/sim_run.h"

namespace shardgym {
using namespace detail;
namespace {

// Ring steps and bytes each rank sends for a block's collectives in one micro-batch (tensor
// parallel, both passes) and its data-parallel gradient reduction.
void comm_volume(const ModelSpec& m, BlockKind kind, const Strategy& s, int world, double& steps,
                 double& bytes) {
  steps = bytes = 0;
  auto add = [&](const std::vector<Collective>& cs, double elem_bytes) {
    for (const Collective& c : cs) {
      if (c.group_size <= 1) continue;
      steps += (c.op == CollOp::kAllReduce ? 2.0 : 1.0) * (c.group_size - 1);
      bytes += c.elements_sent_per_rank() * elem_bytes;
    }
  };
  add(block_collectives(m, kind, s, world), dtype_bytes(m.dtype));
  add(block_grad_sync(m, kind, s, world), m.grad_bytes());
}

// Peak memory (largest rank) the simulator predicts for `plan` with the memory terms of `cal`.
double sim_peak(const ExperimentSpec& spec, const CalibrationFile& cal, const Plan& plan,
                uint64_t seed) {
  ExperimentSpec s = spec;
  const std::string why = apply_calibration(cal, "(fit)", s.cluster);
  if (!why.empty()) throw std::logic_error("calibration does not fit its own cluster: " + why);
  SimRun sim(s);
  sim.reset(seed, plan);
  const auto m = sim.estimate(plan);
  if (!m) throw std::runtime_error("the simulator cannot estimate " + plan.to_string());
  return *std::max_element(m->peak_memory_bytes.begin(), m->peak_memory_bytes.end());
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void describe_machine(CalibrationFile& c) {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) c.host = host;
  utsname u{};
  if (uname(&u) == 0) c.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) c.cpu = line.substr(colon + 2);
      break;
    }
  }
  c.cores = static_cast<int>(std::thread::hardware_concurrency());
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) c.memory_gib = double(pages) * double(page) / double(1ull << 30);
}

// One plan per catalog strategy: every block of a kind the strategy is shape-valid for takes
// it, the other kind keeps its first valid entry. Duplicates are dropped.
std::vector<Plan> calibration_plans(const StrategyCatalog& cat, int blocks) {
  const auto& am = cat.shape_mask(BlockKind::kAttention);
  const auto& mm = cat.shape_mask(BlockKind::kMlp);
  auto first_valid = [&](const std::vector<uint8_t>& mask) {
    for (int k = 0; k < cat.size(); ++k)
      if (mask[k]) return k;
    throw std::invalid_argument("the catalog has no strategy valid for a block kind");
  };
  const int a0 = first_valid(am), m0 = first_valid(mm);
  std::vector<Plan> out;
  std::set<std::string> seen;
  for (int k = 0; k < cat.size(); ++k) {
    if (!am[k] && !mm[k]) continue;
    Plan p;
    for (int b = 0; b < blocks; ++b) {
      const bool attention = ModelSpec::block_kind(b) == BlockKind::kAttention;
      p.blocks.push_back(cat.at(attention ? (am[k] ? k : a0) : (mm[k] ? k : m0)));
    }
    if (seen.insert(p.to_string()).second) out.push_back(p);
  }
  return out;
}

// Changes of activation layout in one micro-batch: between consecutive blocks, and from the
// last block to the data-parallel LM head (the embedding output takes block 0's for free).
double layout_changes(const Plan& plan) {
  int n = 0;
  for (int b = 1; b < plan.size(); ++b)
    n += activation_layout_key(plan.blocks[b - 1]) != activation_layout_key(plan.blocks[b]);
  n += activation_layout_key(plan.blocks.back()) != activation_layout_key(Strategy::dp());
  return n;
}

// Kernels and collectives the physical model counts for a block (cost.h block_kernels,
// through the block cost's host time): simulators whose device issues each kernel, or each
// collective, in one microsecond and the other in none.
class KernelCounter {
 public:
  KernelCounter(const ExperimentSpec& spec, uint64_t seed, const Plan& any)
      : kernels_(with_host(spec, kUnit, 0.0), seed, any),
        collectives_(with_host(spec, 0.0, kUnit), seed, any) {}
  // Block b of `plan`, per micro-batch.
  double of(const Plan& plan, int b) const { return kernels_.host_s(plan, b); }
  double collectives_of(const Plan& plan, int b) const { return collectives_.host_s(plan, b); }

 private:
  static constexpr double kUnit = 1e-6;
  struct Counter {
    Counter(const ExperimentSpec& spec, uint64_t seed, const Plan& any)
        : sim(std::make_unique<SimRun>(spec)) {
      sim->reset(seed, any);
    }
    double host_s(const Plan& plan, int b) const {
      return sim->breakdown(plan).blocks[b].host_s / kUnit;
    }
    std::unique_ptr<SimRun> sim;
  };
  static ExperimentSpec with_host(ExperimentSpec spec, double kernel_s, double collective_s) {
    for (DeviceType& d : spec.cluster.devices)
      d.host_kernel_s = kernel_s, d.host_collective_s = collective_s;
    return spec;
  }
  Counter kernels_, collectives_;
};

// The device fit's points of a plan measured at m micro-batches: one per block kind (its
// blocks alike), the measured compute per micro-batch against the physical model's, with the
// model's kernels and collectives per micro-batch.
void add_compute_points(const Plan& p, const PlanStats& s, int m, const SimRun& sim,
                        const KernelCounter& kernels, std::vector<ComputePoint>& points) {
  const IterationBreakdown bd = sim.breakdown(p);
  for (int kind : {0, 1}) {
    double measured = 0, physics = 0;
    int n = 0;
    for (int b = kind; b < p.size(); b += 2, ++n) {
      measured += (s.fwd[b] + s.bwd[b]) / m;
      physics += bd.blocks[b].fwd_s + bd.blocks[b].bwd_s;
    }
    if (n == 0) continue;
    points.push_back(
        {measured / n, physics / n, kernels.of(p, kind), kernels.collectives_of(p, kind)});
  }
}

// The shape pass (CPU ranks): every uniform plan once more with its batch in the most
// micro-batches of 4 and 2 that it can run, so that the device fit sees the same blocks at a
// small shape, where a kernel's fixed cost weighs more than its arithmetic. One point per row
// of the plan (blocks of a kind alike), its compute per micro-batch.
std::vector<ComputePoint> small_shape_points(const Stepper& step, const TrainingRun& run,
                                             const std::vector<Plan>& uniform, SimRun& sim,
                                             const KernelCounter& kernels,
                                             const LiveMeasureOptions& o) {
  std::vector<ComputePoint> points;
  for (size_t i = 0; i < uniform.size(); ++i) {
    Plan p = uniform[i];
    int m = 0;
    for (int want : {4, 2}) {
      p.pipeline.micro_batches = want;
      if (run.fits(p) && sim.fits(p)) {
        m = want;
        break;
      }
    }
    if (m == 0) continue;
    const PlanStats s = measure(step, p, o);
    add_compute_points(p, s, m, sim, kernels, points);
    if (o.progress) {
      std::ostringstream line;
      line << "shape pass [" << (i + 1) << "/" << uniform.size() << "] " << p.to_string()
           << ": step " << std::fixed << std::setprecision(2) << s.step_s * 1e3 << " ms";
      o.progress(line.str());
    }
  }
  return points;
}

// What one calibration drives: the live run, the simulator beside it (uncalibrated: the fits
// are made against the physical model), and the plans in the order they are measured.
struct Session {
  LiveSetup live;
  ExperimentSpec sspec;
  std::unique_ptr<SimRun> sim;
  int blocks = 0, world = 0;
  std::vector<Plan> uniform;  // one plan per catalog strategy (calibration_plans)
  // The uniform plans `passes` times over (pass after pass, so that a slow minute of the
  // machine falls on one pass of many plans rather than on every pass of one plan), then the
  // random plans: mixtures for the fits of what the table does not hold (overhead, memory,
  // repartition); the table itself comes from the uniform plans only.
  std::vector<Plan> plans;
  size_t uniform_plans = 0;  // plans[0, uniform_plans) are the uniform passes

  TrainingRun& run() const { return live.env->run(); }
};

Session open_session(const std::string& config, const LiveMeasureOptions& o) {
  if (o.warmup < 1)
    throw std::invalid_argument(
        "--warmup must be at least 1 (the first "
        "iteration after a plan change is not measured)");
  if (o.iterations < 1) throw std::invalid_argument("--iterations must be at least 1");
  if (o.passes < 1) throw std::invalid_argument("--passes must be at least 1");
  Session s;
  s.live = open_live(load_experiment(config), config);
  const ExperimentSpec& spec = s.live.spec;
  if (spec.cluster.devices.size() != 1 || spec.cluster.links.size() != 1)
    throw std::invalid_argument(config +
                                ": calibration fits one device type and one link class; "
                                "this cluster has " +
                                std::to_string(spec.cluster.devices.size()) + " and " +
                                std::to_string(spec.cluster.links.size()));
  s.sspec = sim_spec_of(spec);
  s.sspec.cluster.calibration = {};  // fits are made against the physical model
  s.sim = std::make_unique<SimRun>(s.sspec);
  s.blocks = spec.model.num_blocks(), s.world = spec.cluster.world_size();
  s.uniform = calibration_plans(s.run().catalog(), s.blocks);
  for (int pass = 0; pass < o.passes; ++pass)
    s.plans.insert(s.plans.end(), s.uniform.begin(), s.uniform.end());
  s.uniform_plans = s.plans.size();
  std::mt19937_64 rng(o.seed ^ 0xca11b7a7e5eedull);
  for (const Plan& p : random_plans(s.run().catalog(), s.blocks, o.mixed_plans, rng, *s.sim))
    s.plans.push_back(p);
  s.run().reset(o.seed, s.plans.front());
  s.sim->reset(o.seed, s.plans.front());
  return s;
}

// The file's description of itself: when, how, on what.
CalibrationFile describe(const Session& s, const std::string& config,
                         const std::string& command_line, const LiveMeasureOptions& o) {
  const ExperimentSpec& spec = s.live.spec;
  CalibrationFile c;
  c.created = utc_now();
  c.command = command_line;
  c.config = config;
  describe_machine(c);
  c.backend = !spec.live.backend.empty()   ? spec.live.backend
              : spec.live.device == "cuda" ? "nccl"
                                           : "gloo";
  c.launch = spec.live.launch;
  c.device = spec.live.device;
  c.ranks = s.world;
  c.threads_per_rank = spec.live.threads_per_rank;
  c.warmup = o.warmup;
  c.iterations = o.iterations;
  c.passes = o.passes;
  c.plans = static_cast<int>(s.plans.size());
  c.device_name = spec.cluster.devices[0].name;
  c.link_name = spec.cluster.links[0].name;
  c.runtime.model_signature = calibration_signature(s.sim->stage_cost_model(0).model(), s.world);
  return c;
}

void report_plan(const LiveMeasureOptions& o, size_t i, size_t n, const Plan& plan,
                 const PlanStats& s, const double* reference_s) {
  if (!o.progress) return;
  std::ostringstream line;
  line << "[" << (i + 1) << "/" << n << "] " << plan.to_string() << ": step " << std::fixed
       << std::setprecision(2) << s.step_s * 1e3 << " ms (spread " << std::setprecision(0)
       << 100 * s.spread << " %)";
  if (s.optimizer_s > 0)
    line << ", optimizer step " << std::setprecision(2) << s.optimizer_s * 1e3 << " ms";
  if (reference_s) line << ", reference " << std::setprecision(2) << *reference_s * 1e3 << " ms";
  o.progress(line.str());
}

// Every plan of the session measured in turn (PlanStats::from: the plan the run held before).
// With the drift reference (o.drift_reference): the first uniform plan, 1 warm-up and 3
// measured iterations, before the first plan and after every plan (every second random plan:
// below). Each plan's times are divided by the mean of the two references around it over their
// median: the machine's speed while it was measured. On the 2-core AMD EPYC host the same
// plan's step differed by a median 9–15 % between passes a minute apart (7–8 % once divided by
// the reference: the drift common to the plans goes, a plan's own window of fast noise stays).
std::vector<PlanStats> measure_plans(const Session& session, const Stepper& step,
                                     const LiveMeasureOptions& o, CalibrationFile& c) {
  const std::vector<Plan>& plans = session.plans;
  const Plan reference = plans.front();
  LiveMeasureOptions ref_o = o;
  ref_o.warmup = 1, ref_o.iterations = 3;
  std::vector<double> ref_s;
  if (o.drift_reference) {
    ref_s.push_back(measure(step, reference, ref_o).step_s);
    if (o.progress) {
      std::ostringstream line;
      line << "drift reference before the first plan: " << std::fixed << std::setprecision(2)
           << ref_s.back() * 1e3 << " ms";
      o.progress(line.str());
    }
  }
  // Among the random plans the reference comes after every second one, so that the other
  // half is entered from the random plan before it. Entered from the reference (uniform:dp,
  // every parameter on every rank), a plan's repartition only slices what each rank holds: no
  // byte moves, and the repartition fit, which learns from the random plans' changes, saw no
  // transfer at all (2026-11-25: the bandwidth and per-message terms fitted to nothing, and
  // validate-sim's repartitions were predicted at half their time).
  std::vector<PlanStats> stats;
  std::vector<size_t> ref_before;  // per plan: the index in ref_s of the reference before it
  Plan held = reference;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    ref_before.push_back(ref_s.empty() ? 0 : ref_s.size() - 1);
    PlanStats s = measure(step, plan, o);
    s.from = held;
    held = plan;
    const size_t u = session.uniform_plans;
    const bool chained = i >= u && (i - u) % 2 == 0 && i + 1 < plans.size();
    if (o.drift_reference && !chained) {
      ref_s.push_back(measure(step, reference, ref_o).step_s);
      held = reference;
    }
    stats.push_back(s);
    const bool after = o.drift_reference && ref_s.size() - 1 > ref_before.back();
    report_plan(o, i, plans.size(), plan, s, after ? &ref_s.back() : nullptr);
  }
  if (!o.drift_reference) return stats;
  const double typical = median(ref_s);
  std::vector<double> factors;
  for (size_t i = 0; i < stats.size(); ++i) {
    // The references just before and just after the plan (the next one measured).
    factors.push_back((ref_s[ref_before[i]] + ref_s[ref_before[i] + 1]) / 2 / typical);
    stats[i].scale_times(factors.back());
  }
  c.drift_reference = reference.to_string();
  c.drift_reference_s = typical;
  c.drift_spread = quantile(factors, 0.9) - quantile(factors, 0.1);
  if (o.progress) {
    std::ostringstream line;
    line << "drift reference " << reference.to_string() << ": " << std::fixed
         << std::setprecision(2) << typical * 1e3 << " ms median; the machine's speed factor "
         << std::setprecision(3) << quantile(factors, 0.1) << " to " << quantile(factors, 0.9)
         << " (10th to 90th percentile), each plan's times divided by its own";
    o.progress(line.str());
  }
  return stats;
}

// One row of the table per (block kind, strategy): for each block position, its per-pass
// medians per micro-batch.
struct Row {
  int kind;
  Strategy s;
  std::map<int, std::vector<double>> fwd, bwd, comm;
  std::vector<double> spread;
  BlockCost physics;
  // Per micro-batch, as the physical model counts them (KernelCounter).
  double kernels = 0, collectives = 0;
};
using Rows = std::map<std::pair<int, std::string>, Row>;

std::vector<double> block_medians(const std::map<int, std::vector<double>>& by_block) {
  std::vector<double> per_block;
  for (const auto& [b, passes] : by_block) per_block.push_back(median(passes));
  return per_block;
}

// The table's entries: each block's median over the iterations, then over the passes,
// averaged over every block of that kind and strategy. Not the median over the blocks: the
// blocks of a plan share the step's time unevenly by position (block 0, last in the backward,
// waits for the data-parallel gradient reduction to finish: 5.8 ms against 0.4 ms for the
// other blocks of uniform:dp(recompute=1) on 4 threads), and only the mean keeps the sum over
// the plan's blocks.
double mean_of_medians(const std::map<int, std::vector<double>>& by_block) {
  return mean(block_medians(by_block));
}

// The uniform plans' blocks as table rows.
Rows table_rows(const Session& session, const std::vector<PlanStats>& stats,
                const KernelCounter& kernels) {
  Rows rows;
  for (size_t i = 0; i < session.uniform_plans; ++i) {
    const Plan& plan = session.plans[i];
    const PlanStats& s = stats[i];
    const IterationBreakdown bd = session.sim->breakdown(plan);
    const double m = std::max(1, bd.pipeline.micro_batches);
    for (int b = 0; b < session.blocks; ++b) {
      const int kind = static_cast<int>(ModelSpec::block_kind(b));
      auto key = std::make_pair(kind, plan.blocks[b].to_string());
      auto [it, fresh] = rows.emplace(key, Row{kind, plan.blocks[b], {}, {}, {}, {}, bd.blocks[b]});
      Row& r = it->second;
      if (fresh) r.kernels = kernels.of(plan, b), r.collectives = kernels.collectives_of(plan, b);
      r.fwd[b].push_back(s.fwd[b] / m);
      r.bwd[b].push_back(s.bwd[b] / m);
      r.comm[b].push_back(s.comm[b] / m);
      r.spread.push_back(s.spread);
    }
  }
  return rows;
}

void write_table(const Rows& rows, RuntimeCalibration& rc) {
  for (const auto& [key, r] : rows) {
    MeasuredBlock e;
    e.kind = r.kind;
    e.strategy = key.second;
    e.fwd_s = mean_of_medians(r.fwd);
    e.bwd_s = mean_of_medians(r.bwd);
    e.comm_s = mean_of_medians(r.comm);
    e.spread = median(r.spread);
    rc.blocks.push_back(e);
  }
}

// Noise: σ of log(step / the plan's median), pooled over the plans.
double noise_sigma(const std::vector<PlanStats>& stats) {
  std::vector<double> log_dev;
  for (const PlanStats& s : stats)
    for (double x : s.steps) log_dev.push_back(std::log(x / s.step_s));
  return log_dev.size() > 1 ? sample_stddev(log_dev) : 0.0;
}

// Device: its speed against the catalog's figures (peak FLOP/s and memory bandwidth alike)
// and, on CPU ranks, the time each kernel costs the rank's thread (calibration_fit.h), from
// the table's rows and, where the shape pass ran, the same plans at a small micro-batch.
void fit_device_terms(const Session& session, const Rows& rows, const Stepper& step,
                      const KernelCounter& kernels, const PipelinePass& pipelines,
                      const LiveMeasureOptions& o, CalibrationFile& c) {
  std::vector<ComputePoint> points;
  for (const auto& [key, r] : rows) {
    const double measured = median(block_medians(r.fwd)) + median(block_medians(r.bwd));
    points.push_back({measured, r.physics.fwd_s + r.physics.bwd_s, r.kernels, r.collectives});
  }
  const bool serial = session.live.spec.live.device == "cpu" && o.shape_pass;
  if (serial) {
    for (const ComputePoint& p :
         small_shape_points(step, session.run(), session.uniform, *session.sim, kernels, o))
      points.push_back(p);
  }
  const DeviceFit fit = fit_device(points, serial);
  // The pipeline pass's stages (CPU ranks, as the shape pass), priced by the fit: out of
  // sample, how its shapes extrapolate to those a pipeline runs. They are not taken into it:
  // on 2 rank threads (7 calibrations, docs/calibration.md) a fit with them priced the m = 1
  // stages faster than the fit without them in 6 of 7, and no better where the fit without
  // them was too fast; the report shows that fit beside.
  std::vector<ComputePoint> staged;
  std::vector<int> staged_m;
  for (size_t i = 0; serial && i < pipelines.plans.size(); ++i) {
    const int m = pipelines.plans[i].pipeline.micro_batches;
    add_compute_points(pipelines.plans[i], pipelines.stats[i], m, *session.sim, kernels, staged);
    staged_m.resize(staged.size(), m);
  }
  if (!staged.empty()) {
    std::vector<ComputePoint> all = points;
    all.insert(all.end(), staged.begin(), staged.end());
    report_staged_fit(fit, fit_device(all, serial), staged, staged_m, o);
  }
  const DeviceType& dev = session.live.spec.cluster.devices[0];
  c.peak_flops = dev.peak_flops * fit.speed;
  c.memory_bw = (dev.memory_bw > 0 ? dev.memory_bw : dev.peak_flops) * fit.speed;
  c.kernel_s = fit.kernel_s;
  c.collective_s = serial ? fit.collective_s : -1.0;
  c.compute_fit_error = fit.fit_error;
}

// Link: α per ring step and bandwidth from the blocks without chunked overlap.
void fit_link_terms(const Session& session, const Rows& rows, CalibrationFile& c) {
  const ModelSpec mb_model = session.sim->stage_cost_model(0).model();
  std::vector<double> steps, bytes, comm;
  for (const auto& [key, r] : rows) {
    if (r.s.chunks > 1) continue;
    double st = 0, by = 0;
    comm_volume(mb_model, static_cast<BlockKind>(r.kind), r.s, session.world, st, by);
    if (st <= 0) continue;
    steps.push_back(st);
    bytes.push_back(by);
    comm.push_back(mean_of_medians(r.comm));
  }
  const LinkFit fit = fit_link(steps, bytes, comm);
  const LinkClass& link = session.live.spec.cluster.links[0];
  c.link_latency_s = comm.empty() ? link.latency_s : fit.alpha;
  c.link_bandwidth = fit.inv_bandwidth > 0 ? 1.0 / fit.inv_bandwidth : link.bandwidth;
  c.comm_fit_error = fit.fit_error;
}

// Per-step overhead, optimizer seconds per parameter and the redistributions between
// layouts: what the simulator calibrated with everything above (table, device, link) leaves
// unexplained of each plan's step latency, against the parameters each rank updates, the
// plan's changes of activation layout, and the link model's time for those changes (whose
// coefficient is the share of it a step shows: on 4 rank threads the modelled transfer
// of the last block's activations to the data-parallel LM head was most of what made the
// simulator 6 % slow on uniform:tp1d(t=4), with a coefficient fixed at 1).
void fit_step_overheads(const Session& session, const std::vector<PlanStats>& stats,
                        const LiveMeasureOptions& o, CalibrationFile& c) {
  CalibrationFile zero = c;
  zero.runtime.step_overhead_s = zero.runtime.optimizer_s_per_param = 0;
  zero.runtime.redistribution_s = 0, zero.runtime.redistribution_scale = 1;
  ExperimentSpec cspec = session.sspec;
  const std::string why = apply_calibration(zero, "(fit)", cspec.cluster);
  if (!why.empty()) throw std::logic_error("calibration does not fit its own cluster: " + why);
  SimRun calibrated(cspec);
  calibrated.reset(o.seed, session.plans.front());
  std::vector<double> params, layouts, transfers, residual, optimizer, step_s;
  for (size_t i = 0; i < session.plans.size(); ++i) {
    const Plan& plan = session.plans[i];
    const auto pred = calibrated.estimate(plan);
    if (!pred || !pred->ok)
      throw std::runtime_error("the calibrated simulator cannot run " + plan.to_string());
    const IterationBreakdown bd = calibrated.breakdown(plan);
    double moved = bd.head_redistribution_s;
    for (double t : bd.redistribution_s) moved += t;
    moved *= std::max(1, bd.pipeline.micro_batches);
    double p = 0;
    for (const BlockCost& b : session.sim->breakdown(plan).blocks) p += b.params_per_rank;
    params.push_back(p);
    layouts.push_back(layout_changes(plan));
    transfers.push_back(moved);
    optimizer.push_back(stats[i].optimizer_s);
    step_s.push_back(stats[i].step_s);
    // What the prediction leaves out, with the redistributions taken out of it too.
    residual.push_back(stats[i].step_s - pred->step_latency_s + moved);
  }
  const StepTermsFit f = fit_step_terms(params, layouts, transfers, residual, optimizer, step_s);
  RuntimeCalibration& rc = c.runtime;
  rc.step_overhead_s = f.overhead_s, rc.redistribution_s = f.redistribution_s;
  rc.redistribution_scale = f.redistribution_scale;
  rc.optimizer_s_per_param = f.optimizer_s_per_param;
  c.overhead_fit_error = f.fit_error;
  if (o.progress && f.optimizer_timed) {
    std::ostringstream line;
    line << "optimizer step: " << std::fixed << std::setprecision(3) << f.optimizer_fixed_s * 1e3
         << " ms + " << std::setprecision(2) << f.optimizer_s_per_param * 1e9
         << " ns per parameter a rank holds (timed on the ranks); per-step overhead "
         << std::setprecision(3) << f.overhead_s * 1e3 << " ms";
    o.progress(line.str());
  }
}

// Memory: the live peak against the simulator's state and activation terms (each alone, by
// running the simulator with the other scale at 0) and a constant.
void fit_memory_terms(const Session& session, const std::vector<PlanStats>& stats, uint64_t seed,
                      CalibrationFile& c) {
  if (session.sspec.model.live_layers) {
    // The live layers' memory is counted (runtime/core/live_memory.h), not fitted: the scales
    // stay 1, 1 and 0 (unused), and the fit error is the count's median miss on these plans.
    c.runtime.memory_state_scale = 1, c.runtime.memory_activation_scale = 1;
    c.runtime.memory_base_bytes = 0;
    std::vector<double> err;
    for (size_t i = 0; i < session.plans.size(); ++i)
      if (stats[i].peak_bytes > 0)
        err.push_back(std::abs(sim_peak(session.sspec, c, session.plans[i], seed) /
                                   stats[i].peak_bytes - 1));
    c.memory_fit_error = err.empty() ? 0.0 : median(err);
    return;
  }
  CalibrationFile only_state = c, only_act = c;
  only_state.runtime.memory_state_scale = 1, only_state.runtime.memory_activation_scale = 0;
  only_act.runtime.memory_state_scale = 0, only_act.runtime.memory_activation_scale = 1;
  std::vector<double> state, act, peak;
  for (size_t i = 0; i < session.plans.size(); ++i) {
    state.push_back(sim_peak(session.sspec, only_state, session.plans[i], seed));
    act.push_back(sim_peak(session.sspec, only_act, session.plans[i], seed));
    peak.push_back(stats[i].peak_bytes);
  }
  const MemoryFit f = fit_memory(state, act, peak);
  c.runtime.memory_state_scale = f.state_scale,
  c.runtime.memory_activation_scale = f.activation_scale;
  c.runtime.memory_base_bytes = f.base_bytes;
  c.memory_fit_error = f.fit_error;
}

}  // namespace

// Measure (measure_plans, the pipeline pass, the shape pass, the collectives alone), then fit
// the terms in the order each needs the ones before it: table, noise, device, link, step
// overheads, memory, repartition.
CalibrationFile calibrate_live(const std::string& config, const LiveMeasureOptions& o,
                               const std::string& command_line,
                               std::vector<std::pair<double, double>>* repeat_pairs) {
  const Session session = open_session(config, o);
  CalibrationFile c = describe(session, config, command_line, o);
  const KernelCounter kernels(session.sspec, o.seed, session.plans.front());
  TrainingRun& run = session.run();
  const Stepper step = [&run](const Plan& p) { return run.step(p); };
  const std::vector<PlanStats> stats = measure_plans(session, step, o, c);
  // The noise check's pairs (noise_gate.h): each uniform plan against itself a pass later,
  // after the drift reference — the agreement of what the table is made of.
  const size_t per_pass = session.uniform.size();
  for (size_t i = per_pass; repeat_pairs && i < session.uniform_plans; ++i)
    repeat_pairs->emplace_back(stats[i - per_pass].step_s, stats[i].step_s);
  const Rows rows = table_rows(session, stats, kernels);
  write_table(rows, c.runtime);
  c.runtime.noise_sigma = noise_sigma(stats);
  PipelinePass pipelines;
  if (o.pipeline_pass)
    pipelines = measure_pipelines(step, run, *session.sim, session.plans.front(),
                                  o.drift_reference ? c.drift_reference_s : 0.0,
                                  session.live.spec.model.layers, o);
  c.pipelines = pipelines.timings;
  fit_device_terms(session, rows, step, kernels, pipelines, o, c);
  fit_link_terms(session, rows, c);
  fit_step_overheads(session, stats, o, c);
  fit_memory_terms(session, stats, o.seed, c);
  std::vector<MeasuredChange> changes;  // the random plans' changes, then the boundary moves
  for (size_t i = session.uniform_plans + 1; i < session.plans.size(); ++i)
    changes.push_back({stats[i].from, session.plans[i], &stats[i], false});
  for (size_t i = 0; i < pipelines.moves.size(); ++i)
    changes.push_back(
        {pipelines.moves[i].from, pipelines.move_plans[i], &pipelines.moves[i], true});
  fit_repartition_terms(session.sspec, changes, o.seed, o, c);
  time_collectives_alone(session.run(), session.live.spec.live.backend == "nccl", c);
  return c;
}

}  // namespace shardgym
