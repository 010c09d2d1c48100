#include "runtime/live/driver/live_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "runtime/core/cost.h"
#include "runtime/core/live_memory.h"
#include "runtime/live/comm/device.h"
#include "runtime/live/driver/rank_driver.h"
#include "runtime/live/launch/group_sets.h"
#include "runtime/live/launch/world_limits.h"
#include "runtime/live/tp/micro_batches.h"

namespace shardgym::live {
namespace {

// SHARDGYM_RANK_REPORTS=FILE: one JSON line per training iteration with every rank's own
// figures, for looking at how the ranks share a step (scripts/reproduce/rank_decomposition.py;
// docs/calibration.md, "Which rank's figures"). A file that cannot be opened is skipped.
void append_rank_reports(const std::string& path, const std::string& plan, double wall_s,
                         const std::vector<RankReport>& reports) {
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return;
  std::fprintf(f, "{\"plan\": \"%s\", \"wall_s\": %.9g, \"ranks\": [", plan.c_str(), wall_s);
  for (size_t k = 0; k < reports.size(); ++k) {
    const RankReport& r = reports[k];
    std::fprintf(f, "%s{\"rank\": %d, \"step_s\": %.9g, \"optimizer_s\": %.9g, \"busy_s\": %.9g, "
                 "\"blocks\": [", k ? ", " : "", r.rank, r.step_s, r.optimizer_s, r.busy_s);
    for (size_t b = 0; b < r.fwd_s.size() && b < r.bwd_s.size() && b < r.comm_s.size(); ++b)
      std::fprintf(f, "%s[%.9g, %.9g, %.9g]", b ? ", " : "", r.fwd_s[b], r.bwd_s[b], r.comm_s[b]);
    std::fprintf(f, "]}");
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
}

// The rank-worker executable: $SHARDGYM_RANK_WORKER, else next to the running executable,
// else where this build put it.
std::string default_worker() {
  if (const char* w = std::getenv("SHARDGYM_RANK_WORKER")) return w;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    if (::access((dir + "shardgym_rank_worker").c_str(), X_OK) == 0) {
      return dir + "shardgym_rank_worker";
    }
  }
#ifdef SHARDGYM_RANK_WORKER_PATH
  return SHARDGYM_RANK_WORKER_PATH;
#else
  return "";
#endif
}

// The loss every training rank reports; ranks a plan excludes (a share group of weight 0)
// report NaN, so the first finite report is taken (NaN when no rank has one).
double reported_loss(const std::vector<RankReport>& reports) {
  for (const RankReport& r : reports)
    if (!std::isnan(r.loss)) return r.loss;
  return reports.empty() ? std::numeric_limits<double>::quiet_NaN() : reports.front().loss;
}

}  // namespace

std::string why_model_not_live(const ModelSpec& m) {
  // Every block trait runs live (GPT's and Llama's, tp/reference_gpt.h); dropout is never
  // applied (the live model has none, runtime/core/live_memory.cpp counts no masks). Rotary
  // embeddings rotate pairs of a head's features (tp/rotary.h): an odd head_dim has none.
  if (m.rotary && m.heads > 0 && m.head_dim() % 2 != 0)
    return "position: rotary needs an even head dimension, hidden/heads = " +
           std::to_string(m.head_dim()) + " (ModelSpec::validate refuses it too)";
  return "";
}

std::string why_fault_invalid(const LiveSpec& live) {
  if (live.extra.fault.empty()) return "";
  FaultSpec fault;
  try {
    fault = parse_fault(live.extra.fault);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (fault.kind == "exit" && live.launch == "threads")
    return "'exit' cannot be undone in a rank thread; it needs launch = processes";
  if (fault.kind == "nostart" && live.launch != "threads")
    return "'nostart' fails the creation of a rank thread; it needs launch = threads";
  if (fault.rank >= live.ranks)
    return "rank " + std::to_string(fault.rank) +
           " outside live.ranks = " + std::to_string(live.ranks);
  return "";
}

LiveRun::LiveRun(const ExperimentSpec& spec)
    : live_(spec.live), cluster_(spec.cluster), scenario_(spec.scenario.drawn()) {
  const int p = live_.ranks;
  if (p < 1) throw std::invalid_argument("live.ranks must be >= 1");
  const std::string cluster_problem = cluster_.validate();
  if (!cluster_problem.empty()) throw std::invalid_argument("cluster: " + cluster_problem);
  if (cluster_.world_size() != p) {
    throw std::invalid_argument("live.ranks = " + std::to_string(p) + " but the cluster '" +
                                cluster_.name + "' has " + std::to_string(cluster_.world_size()) +
                                " devices; they must agree");
  }
  if (live_.launch != "threads" && live_.launch != "processes") {
    throw std::invalid_argument("live.launch must be 'threads' or 'processes', not '" +
                                live_.launch + "'");
  }
  ModelSpec m = spec.model;
  if (live_.precision == "float32") {
    m.dtype = DType::kFloat32;
  } else if (live_.precision == "float64") {
    m.dtype = DType::kFloat64;
  } else {
    throw std::invalid_argument("live.precision '" + live_.precision +
                                "' is not supported by the CPU live runtime (float32, float64)");
  }
  m.mixed_precision = false;  // params, grads and both AdamW moments in the model dtype
  const std::string model_problem = m.validate();
  if (!model_problem.empty()) throw std::invalid_argument("model: " + model_problem);
  if (m.vocab < 256) {
    throw std::invalid_argument("model.vocab = " + std::to_string(m.vocab) +
                                ": the byte-level tokenizer needs at least 256");
  }
  const int g = effective_global_batch(m, p);
  if (g % p != 0) {
    throw std::invalid_argument("model.global_batch = " + std::to_string(g) +
                                " is not a multiple of live.ranks = " + std::to_string(p));
  }
  config_.model = m;
  config_.world_size = p;
  config_.lr = live_.extra.lr;
  config_.weight_decay = live_.extra.weight_decay;
  config_.clip = live_.extra.clip;
  config_.threads = live_.threads_per_rank;
  config_.corpus = live_.corpus;
  config_.timeout_s = live_.timeout_s;
  config_.device = live_.device;
  config_.backend = !live_.backend.empty()     ? live_.backend
                    : live_.device == "cuda" ? "nccl"
                                             : "gloo";
  // Rejected here, before any rank starts: a device this build or machine cannot give.
  if (const std::string why = why_device_unusable(config_.device, config_.backend, p,
                                              live_.launch == "threads");
      !why.empty()) {
    throw std::invalid_argument("live.device / live.backend: " + why);
  }
  if (const std::string why = why_fault_invalid(live_); !why.empty()) {
    throw std::invalid_argument("live.extra.fault: " + why);  // before any rank starts
  }
  if (const std::string why = why_model_not_live(config_.model); !why.empty())
    throw std::invalid_argument("model: " + why);
  config_.fault = live_.extra.fault;
  // Rejected here, before any rank starts: a world this host cannot hold (the config loader
  // has said so already for configs from files; the memory is checked at reset, with the plan).
  if (const std::string why = why_world_does_not_fit(world_request(0), host_limits());
      !why.empty()) {
    throw std::invalid_argument("live.ranks: " + why);
  }
  catalog_ = StrategyCatalog(m, p, spec.catalog);
  const DeviceType& dev = cluster_.device_of(0);
  power_ = {dev.idle_w, dev.busy_w};
  worker_ = !live_.extra.worker.empty() ? live_.extra.worker : default_worker();
  if (const char* path = std::getenv("SHARDGYM_RANK_REPORTS")) rank_reports_ = path;
  if (live_.launch == "processes" && worker_.empty()) {
    throw std::invalid_argument(
        "live.launch = processes needs the rank-worker executable: live.extra.worker or "
        "SHARDGYM_RANK_WORKER");
  }
}

// The ranks of the last episode leave here: one that stalls is killed, and the process's exit
// status must still say so (note_late_failure, read by the command line's main()).
LiveRun::~LiveRun() {
  const std::string why = stop_ranks();
  if (!why.empty()) note_late_failure("live run, after its last episode: " + why);
}

LiveWorld LiveRun::world_request(double memory_per_rank) const {
  LiveWorld w;
  w.ranks = config_.world_size;
  w.thread_launch = live_.launch == "threads";
  w.threads_per_rank = config_.threads;
  w.memory_per_rank = memory_per_rank;
  return w;
}

std::string LiveRun::stop_ranks() {
  std::string why;
  if (driver_) why = driver_->stop();
  driver_.reset();
  return why;
}

std::string LiveRun::why_invalid(const Plan& plan) const {
  const int p = config_.world_size;
  std::string why = why_live_plan_invalid(config_.model, plan, p);
  if (!why.empty()) return why;
  const int g = effective_global_batch(config_.model, p);
  for (int b = 0; b < plan.size(); ++b) {
    const Strategy& s = plan.blocks[b];
    const int split = s.replicas(plan.stage_world(p)) * s.chunks;  // over the block's stage
    if (split <= 0 || g % split != 0) {
      return "block " + std::to_string(b) + " (" + s.to_string() + "): the global batch of " +
             std::to_string(g) + " sequences does not split into " + std::to_string(split) +
             " (replicas × chunks)";
    }
  }
  return why_micro_batches_invalid(config_.model, plan, p, g, micro_batches_of(plan));
}

int LiveRun::micro_batches_of(const Plan& plan) const {
  // A plan that writes m (`@pp(m=4)`) runs it; else set_micro_batches' m if one was set; else
  // the simulator's count (plan_micro_batches: Megatron-LM's rule).
  if (plan.pipeline.micro_batches <= 0 && micro_batches_ > 0) return micro_batches_;
  return plan_micro_batches(plan, config_.model, config_.world_size);
}

void LiveRun::set_micro_batches(int m) {
  // The empty plan leaves only what no plan can change: m ≥ 1 and m | G/P.
  const std::string why = why_micro_batches_invalid(
      config_.model, Plan{}, config_.world_size,
      effective_global_batch(config_.model, config_.world_size), m);
  if (!why.empty()) throw std::invalid_argument("set_micro_batches: " + why);
  micro_batches_ = m;
}

std::vector<RankReport> LiveRun::command(RankCommand cmd) {
  if (!driver_) throw std::runtime_error("live run is stopped: " + last_error_);
  cmd.seq = ++seq_;
  driver_->post(cmd);
  try {
    return driver_->collect(cmd.seq);
  } catch (const std::exception& e) {
    last_error_ = e.what();
    driver_.reset();  // collect() has stopped every rank already
    throw std::runtime_error(last_error_);
  }
}

void LiveRun::reset(uint64_t seed, const Plan& initial) {
  const std::string why = why_invalid(initial);
  if (!why.empty()) throw std::invalid_argument("initial plan: " + why);
  // The previous episode's ranks leave first. One that does not (stalled between episodes)
  // is killed, and the run fails naming it: its next episode would start on a machine in an
  // unknown state, and a run that exits 0 would hide it.
  if (const std::string stalled = stop_ranks(); !stalled.empty()) {
    last_error_ = "between episodes: " + stalled;
    throw std::runtime_error("live reset: " + last_error_);
  }
  // The plan is known now: the ranks' memory joins the check (host memory; a GPU's is the
  // action mask's business).
  const double per_rank =
      config_.device == "cuda"
          ? 0
          : live_memory_estimate(config_.model, initial, config_.world_size,
                                 micro_batches_of(initial))
                .total();
  if (const std::string why = why_world_does_not_fit(world_request(per_rank), host_limits());
      !why.empty()) {
    throw std::invalid_argument("live.ranks: " + why);
  }
  last_error_.clear();
  seq_ = 0;
  step_ = 0;
  driver_ = live_.launch == "threads" ? make_thread_driver(config_)
                                      : make_process_driver(config_, worker_);
  RankCommand cmd;
  cmd.op = RankOp::kReset;
  cmd.plan = initial.to_string();
  cmd.seed = seed;
  command(cmd);
  plan_ = initial;
}

Measurement LiveRun::train_step(const Plan& plan) {
  const std::string why = why_invalid(plan);
  if (!why.empty()) {
    Measurement m;
    m.latency_source = "wallclock";
    m.ok = false;
    m.error = "live step " + std::to_string(step_) + ": invalid plan: " + why;
    return m;
  }
  const int warmup = std::max(0, live_.warmup_iterations);
  const int measured = std::max(1, live_.iterations);
  Measurement first;
  std::vector<Measurement> runs;
  for (int i = 0; i < warmup + measured; ++i) {
    Measurement one = iterate(plan);
    if (!one.ok) return one;
    plan_ = plan;  // the ranks hold it now
    if (i == 0) first = one;
    if (i >= warmup) runs.push_back(std::move(one));
  }
  ++step_;
  if (runs.size() == 1) {
    Measurement m = std::move(runs.front());
    m.repartition_s = first.repartition_s;
    m.repartition_bytes = first.repartition_bytes;
    m.repartition_peak_bytes = first.repartition_peak_bytes;
    return m;
  }
  // Medians over the measured iterations; peak memory the largest any of them reached.
  auto median_of = [&](auto get) {
    std::vector<double> xs;
    for (const Measurement& r : runs) xs.push_back(get(r));
    std::sort(xs.begin(), xs.end());
    const size_t n = xs.size();
    return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
  };
  auto quantile_of = [&](double q) {
    std::vector<double> xs;
    for (const Measurement& r : runs) xs.push_back(r.step_latency_s);
    std::sort(xs.begin(), xs.end());
    const double pos = q * (xs.size() - 1);
    const size_t lo = static_cast<size_t>(pos), hi = std::min(lo + 1, xs.size() - 1);
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo]);
  };
  Measurement m = runs.back();
  m.repartition_s = first.repartition_s;
  m.repartition_bytes = first.repartition_bytes;
  m.repartition_peak_bytes = first.repartition_peak_bytes;
  m.step_latency_s = median_of([](const Measurement& r) { return r.step_latency_s; });
  m.energy_j = median_of([](const Measurement& r) { return r.energy_j; });
  m.optimizer_s = median_of([](const Measurement& r) { return r.optimizer_s; });
  for (size_t b = 0; b < m.block_fwd_s.size(); ++b) {
    m.block_fwd_s[b] = median_of([b](const Measurement& r) { return r.block_fwd_s[b]; });
    m.block_bwd_s[b] = median_of([b](const Measurement& r) { return r.block_bwd_s[b]; });
    m.block_comm_s[b] = median_of([b](const Measurement& r) { return r.block_comm_s[b]; });
  }
  for (const Measurement& r : runs)
    for (size_t k = 0; k < m.peak_memory_bytes.size() && k < r.peak_memory_bytes.size(); ++k)
      m.peak_memory_bytes[k] = std::max(m.peak_memory_bytes[k], r.peak_memory_bytes[k]);
  m.iterations = measured;
  m.step_latency_spread =
      m.step_latency_s > 0 ? (quantile_of(0.9) - quantile_of(0.1)) / m.step_latency_s : 0.0;
  return m;
}

void fold_rank_reports(const std::vector<RankReport>& reports, int blocks, Measurement& m) {
  m.step_latency_s = m.repartition_s = m.repartition_bytes = m.repartition_peak_bytes = 0;
  m.optimizer_s = 0;
  m.peak_memory_bytes.clear();
  m.block_fwd_s.assign(blocks, 0);
  m.block_bwd_s.assign(blocks, 0);
  m.block_comm_s.assign(blocks, 0);
  const RankReport* critical = nullptr;
  for (const RankReport& r : reports) {
    m.step_latency_s = std::max(m.step_latency_s, r.step_s);
    m.repartition_s = std::max(m.repartition_s, r.repartition_s);
    m.repartition_bytes += r.repartition_bytes;
    m.repartition_peak_bytes = std::max(m.repartition_peak_bytes, r.repartition_peak_bytes);
    m.peak_memory_bytes.push_back(r.peak_bytes);
    const bool timed = static_cast<int>(std::min({r.fwd_s.size(), r.bwd_s.size(),
                                                  r.comm_s.size()})) >= blocks;
    if (timed && (!critical || r.step_s > critical->step_s)) critical = &r;
  }
  // The block figures and the optimizer step are the critical rank's: the one whose step is
  // the step latency reported. Its blocks, its optimizer step and the rest of its step add up
  // to that latency, so the simulator's additive step (blocks + optimizer + one per-step
  // constant) decomposes the figure it predicts. Other choices do not add up to it: a maximum
  // over the ranks block by block collects, in every block with a collective, the rank that
  // was descheduled inside it; a mean over the ranks leaves out the time a rank woken late
  // spends before its stopwatch starts (docs/calibration.md, "Which rank's figures").
  // With pipeline stages a rank times only its stage's blocks: each block's figures are those
  // of the slowest rank that ran it (the critical rank itself without stages).
  if (!critical) return;
  for (int b = 0; b < blocks; ++b) {
    const RankReport* by = critical;
    const auto ran = [b](const RankReport& r) { return r.fwd_s[b] > 0; };
    if (!ran(*critical))
      for (const RankReport& r : reports)
        if (static_cast<int>(std::min({r.fwd_s.size(), r.bwd_s.size(), r.comm_s.size()})) >=
                blocks &&
            ran(r) && (by == critical || r.step_s > by->step_s))
          by = &r;
    m.block_fwd_s[b] = by->fwd_s[b];
    m.block_bwd_s[b] = by->bwd_s[b];
    m.block_comm_s[b] = by->comm_s[b];
  }
  m.optimizer_s = critical->optimizer_s;
}

Measurement LiveRun::iterate(const Plan& plan) {
  Measurement m;
  m.latency_source = "wallclock";
  // CUDA: the caching allocator's peak of the rank's GPU (shared by the ranks on that GPU
  // when the backend is Gloo).
  m.memory_source = config_.device == "cuda" ? "cuda-allocator" : "allocator";
  EnergyMeter energy(power_);
  m.energy_source = energy.source();
  RankCommand cmd;
  cmd.op = RankOp::kStep;
  cmd.plan = plan.to_string();
  cmd.micro_batches = micro_batches_of(plan);
  cmd.slowdown = slowdown_at(step_);
  if (std::all_of(cmd.slowdown.begin(), cmd.slowdown.end(), [](double f) { return f == 1; }))
    cmd.slowdown.clear();
  const Stopwatch wall;
  energy.start();
  std::vector<RankReport> reports;
  try {
    reports = command(cmd);
  } catch (const std::exception& e) {
    m.ok = false;
    m.error = "live step " + std::to_string(step_) + ": " + e.what();
    return m;
  }
  const double wall_s = wall.elapsed_s();
  fold_rank_reports(reports, config_.model.num_blocks(), m);
  std::vector<double> busy;
  for (const RankReport& r : reports) busy.push_back(r.busy_s);
  if (!rank_reports_.empty()) append_rank_reports(rank_reports_, cmd.plan, wall_s, reports);
  m.loss = reported_loss(reports);
  m.tokens = static_cast<double>(effective_global_batch(config_.model, config_.world_size)) *
             config_.model.seq;
  m.energy_j = energy.stop(wall_s, busy);
  return m;
}

std::vector<int> LiveRun::rank_pids() const {
  return driver_ ? driver_->pids() : std::vector<int>{};
}

std::vector<TrainingRun::CollectiveTiming> LiveRun::time_collectives(double bytes, int reps) {
  if (!running()) throw std::logic_error("LiveRun::time_collectives: reset the run first");
  if (!(bytes >= 4 && bytes <= 1e9) || reps < 1 || reps > 10000)
    throw std::invalid_argument("LiveRun::time_collectives: bytes in [4, 1e9] and reps in "
                                "[1, 10000], not " + std::to_string(bytes) + " and " +
                                std::to_string(reps));
  RankCommand cmd;
  cmd.op = RankOp::kCollectives;
  cmd.bytes = static_cast<int64_t>(bytes);
  cmd.reps = reps;
  const std::vector<RankReport> reports = command(cmd);
  // The ranks walk standard_group_sets in order, three collectives per group of two or more,
  // then the stage boundaries (rank_protocol.h); entry k of every report is the same timing.
  std::vector<CollectiveTiming> out;
  auto add = [&](const std::string& op, std::vector<int> group) {
    const size_t k = out.size();
    CollectiveTiming c{op, std::move(group), static_cast<double>(cmd.bytes), 0.0};
    for (const RankReport& r : reports)  // the slowest member's
      if (k < r.comm_s.size() && !std::isnan(r.comm_s[k]))
        c.seconds = std::max(c.seconds, r.comm_s[k]);
    out.push_back(std::move(c));
  };
  for (const auto& set : standard_group_sets(config_.world_size))
    if (set.size() >= 2)
      for (const char* op : kTimedCollectives) add(op, set);
  // One stage boundary per stage size S: ranks [0, 2·S), each with its counterpart.
  for (const int s : timed_stage_sizes(config_.world_size)) {
    std::vector<int> group(2 * s);
    std::iota(group.begin(), group.end(), 0);
    add("p2p", std::move(group));
  }
  return out;
}

double LiveRun::eval_loss(int index) {
  RankCommand cmd;
  cmd.op = RankOp::kEval;
  cmd.eval_index = index;
  return reported_loss(command(cmd));
}

std::vector<double> LiveRun::slowdown_at(int step) const {
  std::vector<double> slow = scenario_.state_at(step, cluster_).slowdown;
  slow.resize(static_cast<size_t>(std::max(0, config_.world_size)), 1.0);
  return slow;
}

RunContext LiveRun::current_context() const {
  RunContext c;
  c.step = step_;
  // Emulated stragglers (the scenario's straggler events, RankTrainer::set_compute_stretch):
  // the env knows each rank's factor as the simulator's env does.
  c.rank_slowdown = slowdown_at(step_);
  c.max_compute_slowdown = *std::max_element(c.rank_slowdown.begin(), c.rank_slowdown.end());
  if (c.max_compute_slowdown == 1) c.rank_slowdown.clear();
  else c.rank_alive.assign(c.rank_slowdown.size(), 1);
  c.phase = scenario_.phase_at(step_);
  c.num_phases = scenario_.num_phases();
  c.link_bw_factor.assign(cluster_.links.size(), 1.0);  // loopback: not varied, not measured
  c.memory_capacity = memory_capacity();
  return c;
}

double LiveRun::memory_capacity() const {
  double cap = 0;
  for (int r = 0; r < cluster_.world_size(); ++r) {
    const double m = cluster_.device_of(r).memory_bytes;
    cap = r == 0 ? m : std::min(cap, m);
  }
  return cap;
}

bool LiveRun::fits(const Plan& plan) const {
  if (plan.size() != config_.model.num_blocks() || !why_invalid(plan).empty()) return false;
  const double capacity = memory_capacity();
  return capacity <= 0 ||
         live_memory_estimate(config_.model, plan, config_.world_size, micro_batches_of(plan))
                     .total() +
                 cluster_.max_workspace_bytes() <=
             capacity;
}

std::vector<uint8_t> LiveRun::mask_row(int block) const {
  if (block < 0 || block >= config_.model.num_blocks()) {
    throw std::out_of_range("action_mask: block " + std::to_string(block) + " outside [0, " +
                            std::to_string(config_.model.num_blocks()) + ")");
  }
  std::vector<uint8_t> mask = catalog_.shape_mask(ModelSpec::block_kind(block));
  if (plan_.size() != config_.model.num_blocks()) return mask;  // before the first reset
  Plan trial = plan_;
  for (int k = 0; k < catalog_.size(); ++k) {
    if (!mask[k]) continue;
    trial.blocks[block] = catalog_.at(k);
    mask[k] = fits(trial);
  }
  return mask;
}

}  // namespace shardgym::live
