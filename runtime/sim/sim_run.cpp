#include "runtime/sim/sim_run.h"

#include <algorithm>
#include <stdexcept>

namespace shardgym {
namespace {

// Checks a scenario against the cluster; throws naming the event.
void validate_scenario(const Scenario& sc, const ClusterSpec& cluster) {
  const int world = cluster.world_size();
  for (size_t i = 0; i < sc.events.size(); ++i) {
    const ScenarioEvent& e = sc.events[i];
    const std::string where = "scenario '" + sc.name + "' event " + std::to_string(i) + " (step " +
                              std::to_string(e.step) + "): ";
    if (e.step < 0) throw std::invalid_argument(where + "step must be >= 0");
    switch (e.kind) {
      case EventKind::kLinkBandwidth:
        if (cluster.link_index(e.target) < 0)
          throw std::invalid_argument(where + "unknown link class '" + e.target + "'");
        if (!(e.factor > 0)) throw std::invalid_argument(where + "bandwidth factor must be > 0");
        break;
      case EventKind::kStraggler:
        if (e.rank < 0 || e.rank >= world)
          throw std::invalid_argument(where + "straggler rank " + std::to_string(e.rank) +
                                      " outside a world of " + std::to_string(world));
        if (!(e.factor > 0)) throw std::invalid_argument(where + "straggler factor must be > 0");
        break;
      case EventKind::kSeqLength:
      case EventKind::kBatch:
        if (e.value <= 0) throw std::invalid_argument(where + "value must be positive");
        break;
      case EventKind::kRankLoss:
      case EventKind::kRankJoin:
        if (e.rank < 0 || e.rank >= world)
          throw std::invalid_argument(where + "rank " + std::to_string(e.rank) +
                                      " outside a world of " + std::to_string(world));
        break;
    }
  }
  if (sc.has_rank_loss()) {
    const RestartModel& r = sc.restart;
    if (!(r.restart_s >= 0) || !(r.read_bytes_per_s > 0) || r.checkpoint_interval < 1)
      throw std::invalid_argument("scenario '" + sc.name +
                                  "': rank_loss events need a restart model (restart_s >= 0, "
                                  "read bandwidth > 0, checkpoint_interval >= 1)");
  }
  if (!(sc.noise >= 0)) throw std::invalid_argument("scenario '" + sc.name + "': noise < 0");
}

// The scenario as a run holds it: its draws made, checked against the cluster (after the
// model and the cluster themselves), events sorted by step.
Scenario checked_scenario(const ExperimentSpec& spec) {
  check_sim_spec(spec.model, spec.cluster);
  Scenario sc = spec.scenario.drawn();
  validate_scenario(sc, spec.cluster);
  std::stable_sort(sc.events.begin(), sc.events.end(),
                   [](const auto& a, const auto& b) { return a.step < b.step; });
  return sc;
}

// The conditions a scenario state sets: the model's, as it says.
Conditions conditions_of(const ModelSpec& model, const ScenarioState& state) {
  Conditions c;
  c.model = model;
  c.link_factor = state.link_factor;
  c.slowdown = state.slowdown;
  if (state.seq > 0) c.model.seq = state.seq;
  if (state.global_batch > 0) c.model.global_batch = state.global_batch;
  return c;
}

// The pipeline a run holds for a plan whose pipeline part is `written`: the resolved one, but
// an m the plan did not write stays unwritten (0), so that the next plan's degrees or batch
// derive their own (plan_micro_batches).
Pipeline held_pipeline(const Pipeline& resolved, const Pipeline& written) {
  Pipeline held = resolved;
  if (written.micro_batches <= 0) held.micro_batches = 0;
  return held;
}

}  // namespace

SimRun::SimRun(const ExperimentSpec& spec, SimOptions options)
    : scenario_(checked_scenario(spec)),
      plan_(resolve_plan(spec.initial_plan, spec.model, spec.cluster)),
      pricer_(spec.model, spec.cluster, spec.catalog, std::move(options),
              conditions_of(spec.model, scenario_.state_at(0, spec.cluster)), plan_,
              scenario_.events),
      blocks_(spec.model.num_blocks()),
      world_(spec.cluster.world_size()),
      noise_(spec.scenario.noise) {
  for (const auto& e : scenario_.events) {
    event_steps_.push_back(e.step);
    rank_events_ = rank_events_ || e.kind == EventKind::kStraggler ||
                   e.kind == EventKind::kRankLoss || e.kind == EventKind::kRankJoin;
  }
  event_steps_.erase(std::unique(event_steps_.begin(), event_steps_.end()), event_steps_.end());
  install(0);
  reset(spec.seeds.empty() ? 0 : spec.seeds.front(), plan_);
}

bool SimRun::needs_spare(const Pipeline& pipe, std::vector<int>* ranks) const {
  if (!any_lost_) return false;
  bool any = false;
  const int n = static_cast<int>(pipe.shares.size());
  const int p = std::max(1, pipe.stages);
  const int stage_world = world_ / p, g = n > 0 ? stage_world / n : stage_world;
  for (int r = 0; r < world_; ++r) {
    if (!lost_[r] || replaced_[r]) continue;
    if (n > 0 && pipe.shares[std::min(n - 1, (r % stage_world) / g)] == 0) continue;
    any = true;
    if (ranks) ranks->push_back(r);
  }
  return any;
}

void SimRun::charge_restart(Measurement& m) const {
  // scenario.h RestartModel: relaunch, reload the checkpoint, redo half an interval.
  const RestartModel& r = scenario_.restart;
  double state = 0;
  for (double b : m.peak_memory_bytes) state = std::max(state, b);
  const double restart = r.restart_s + (r.read_bytes_per_s > 0 ? state / r.read_bytes_per_s : 0) +
                         0.5 * r.checkpoint_interval * m.step_latency_s;
  m.repartition_s += restart;
  m.energy_j += pricer_.idle_power_w() * restart;
}

void SimRun::install(int step) {
  const ScenarioState state = scenario_.state_at(step, cluster());
  lost_ = state.lost;
  any_lost_ = std::find(lost_.begin(), lost_.end(), 1) != lost_.end();
  if (replaced_.size() != lost_.size()) replaced_.assign(lost_.size(), 0);
  for (int r = 0; r < world_; ++r)
    if (!lost_[r]) replaced_[r] = 0;  // back in service: no spare stands in any more
  const Conditions c = conditions_of(pricer_.model(), state);
  pricer_.set_conditions(c);
  // Whether or not the conditions changed: the run is built under step 0's, so the first
  // episode's context would otherwise miss a straggler from step 0 that later ones report.
  max_slowdown_ = *std::max_element(c.slowdown.begin(), c.slowdown.end());
}

void SimRun::draw_link_measurement() {
  const auto& f = pricer_.conditions().link_factor;
  measured_link_.resize(f.size());
  for (size_t l = 0; l < f.size(); ++l) measured_link_[l] = f[l] * noise_.next();
}

void SimRun::hold(const std::vector<int>& idx) {
  in_force_.idx = idx;
  in_force_.keys.resize(idx.size());
  for (size_t b = 0; b < idx.size(); ++b) in_force_.keys[b] = pricer_.entry_key(idx[b]);
  in_force_.gen = pricer_.generation();
  pricer_.forget_in_force_memory();
}

void SimRun::reset(uint64_t seed, const Plan& initial) {
  replaced_.assign(world_, 0);
  install(0);  // shape validity depends on the conditions (seq length)
  const Pipeline before = pricer_.pipeline();
  std::vector<int> idx;
  const std::string err = resolve(initial, idx);
  if (!err.empty()) {
    pricer_.configure(before);
    install(step_);  // leave the episode as it was
    throw std::invalid_argument("initial plan: " + err);
  }
  noise_.seed(seed);
  step_ = 0;
  hold(idx);
  // Held before plan_ is assigned: `initial` may be plan_.
  Pipeline held = held_pipeline(pricer_.pipeline(), initial.pipeline);
  plan_ = initial;
  plan_.pipeline = std::move(held);
  draw_link_measurement();
}

void SimRun::step_into(const Plan& plan, Measurement& m) {
  {  // m = Measurement{}, keeping the vectors' storage
    std::vector<double> fwd, bwd, comm, peak;
    fwd.swap(m.block_fwd_s), bwd.swap(m.block_bwd_s), comm.swap(m.block_comm_s);
    peak.swap(m.peak_memory_bytes);
    m = Measurement{};
    fwd.clear(), bwd.clear(), comm.clear(), peak.clear();
    m.block_fwd_s.swap(fwd), m.block_bwd_s.swap(bwd), m.block_comm_s.swap(comm);
    m.peak_memory_bytes.swap(peak);
  }
  // The stages' blocks before a pipeline change (only then can they differ).
  const bool same_pipe = plan.pipeline == pricer_.pipeline();
  if (!same_pipe) before_stage_ = pricer_.block_stages();
  const int before_world = pricer_.stage_world();  // resolve() installs the new pipeline's
  const std::string err = resolve(plan, scratch_);
  if (!err.empty()) {
    m.ok = false;
    m.error = "sim step " + std::to_string(step_) + ": " + err;
    return;
  }
  pricer_.evaluate(scratch_, &in_force_.idx, same_pipe ? pricer_.block_stages() : before_stage_,
                   before_world, plan_.pipeline.shares, &noise_, m);
  spare_scratch_.clear();
  if (needs_spare(pricer_.pipeline(), &spare_scratch_)) {
    charge_restart(m);
    for (int r : spare_scratch_) replaced_[r] = 1;
  }
  for (int b = 0; b < blocks_; ++b) {
    if (scratch_[b] == in_force_.idx[b]) continue;
    plan_.blocks[b] = pricer_.entry(scratch_[b]);
    in_force_.keys[b] = pricer_.entry_key(scratch_[b]);
  }
  // A copy first: `plan` may be plan_.
  plan_.pipeline = held_pipeline(pricer_.pipeline(), plan.pipeline);
  in_force_.idx.swap(scratch_);
  in_force_.gen = pricer_.generation();
  pricer_.note_in_force_memory(
      *std::max_element(m.peak_memory_bytes.begin(), m.peak_memory_bytes.end()));
  ++step_;
  if (std::binary_search(event_steps_.begin(), event_steps_.end(), step_)) install(step_);
  draw_link_measurement();
}

void SimRun::context_into(RunContext& c) const {
  c.step = step_;
  c.phase = static_cast<int>(std::upper_bound(event_steps_.begin(), event_steps_.end(), step_) -
                             event_steps_.begin());
  c.num_phases = 1 + static_cast<int>(event_steps_.size());
  c.link_bw_factor.assign(measured_link_.begin(), measured_link_.end());
  c.seq_factor = double(pricer_.conditions().model.seq) / pricer_.model().seq;
  c.max_compute_slowdown = max_slowdown_;
  if (rank_events_) {  // without straggler or loss events every rank is nominal: left empty
    const std::vector<double>& slow = pricer_.conditions().slowdown;
    c.rank_slowdown.assign(slow.begin(), slow.end());
    c.rank_alive.resize(world_);
    for (int r = 0; r < world_; ++r) c.rank_alive[r] = !lost_[r] || replaced_[r];
  } else {
    c.rank_slowdown.clear();
    c.rank_alive.clear();
  }
  c.memory_capacity = pricer_.min_capacity();
}

void SimRun::action_mask_rows_into(int first, int count, uint8_t* out) const {
  pricer_.mask_rows(in_force_.idx, first, count, out);
}

std::optional<Measurement> SimRun::estimate(const Plan& plan) const {
  Measurement m;
  std::vector<int> idx;
  const Pipeline before = pricer_.pipeline();
  const bool same_pipe = plan.pipeline == before;
  if (!same_pipe) before_stage_ = pricer_.block_stages();
  const int before_world = pricer_.stage_world();  // resolve() installs the new pipeline's
  const std::string err = resolve(plan, idx);
  if (err.empty()) {
    pricer_.evaluate(idx, &in_force_.idx, same_pipe ? pricer_.block_stages() : before_stage_,
                     before_world, plan_.pipeline.shares, nullptr, m);
    if (needs_spare(pricer_.pipeline())) charge_restart(m);
  }
  pricer_.configure(before);  // the plan in force keeps its stages
  if (!err.empty()) {
    m.ok = false;
    m.error = "sim estimate: " + err;
  }
  return m;
}

bool SimRun::fits(const Plan& plan) const {
  // The env asks on every step that changes several blocks (partition_env.h): the plan in
  // force's pipeline is kept without a copy, the entries in a kept buffer.
  const bool same_pipe = plan.pipeline.micro_batches > 0 && plan.pipeline == pricer_.pipeline();
  std::optional<Pipeline> before;
  if (!same_pipe) before = pricer_.pipeline();
  const bool ok = resolve(plan, fits_idx_).empty() && pricer_.fits_memory(fits_idx_);
  if (before) pricer_.configure(*before);  // the plan in force keeps its stages
  return ok;
}

IterationBreakdown SimRun::breakdown(const Plan& plan) const {
  std::vector<int> idx;
  const Pipeline before = pricer_.pipeline();
  const std::string err = resolve(plan, idx);
  if (!err.empty()) {
    pricer_.configure(before);
    throw std::invalid_argument("breakdown: " + err);
  }
  IterationBreakdown bd = pricer_.breakdown(idx);
  pricer_.configure(before);  // the plan in force keeps its stages
  return bd;
}

std::unique_ptr<TrainingRun> SimRun::clone() const { return std::make_unique<SimRun>(*this); }

std::unique_ptr<TrainingRun> SimRun::clone_holding(const Plan& plan) const {
  auto c = std::make_unique<SimRun>(*this);
  std::vector<int> idx;
  const std::string err = c->resolve(plan, idx);  // installs the plan's pipeline and shares
  if (!err.empty()) throw std::invalid_argument("clone_holding: " + err);
  c->hold(idx);
  c->plan_ = plan;
  c->plan_.pipeline = held_pipeline(c->pricer_.pipeline(), plan.pipeline);
  return c;
}

}  // namespace shardgym
