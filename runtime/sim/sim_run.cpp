#include "runtime/sim/sim_run.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/core/data_shares.h"
#include "runtime/sim/pipeline_model.h"

namespace shardgym {
namespace {

// Checks a scenario against the cluster; throws naming the event.
void validate_scenario(const Scenario& sc, const ClusterSpec& cluster) {
  const int world = cluster.world_size();
  for (size_t i = 0; i < sc.events.size(); ++i) {
    const ScenarioEvent& e = sc.events[i];
    const std::string where = "scenario '" + sc.name + "' event " + std::to_string(i) +
                              " (step " + std::to_string(e.step) + "): ";
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

ModelSpec checked_model(const ModelSpec& m) {
  const std::string bad = m.validate();
  if (!bad.empty()) throw std::invalid_argument("model '" + m.name + "': " + bad);
  return m;
}

int checked_world(const ClusterSpec& c) {
  const std::string bad = c.validate();
  if (!bad.empty()) throw std::invalid_argument("cluster '" + c.name + "': " + bad);
  return c.world_size();
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
    : model_(checked_model(spec.model)),
      scenario_(spec.scenario.drawn()),
      catalog_(model_, checked_world(spec.cluster), spec.catalog),
      cost_(spec.cluster, options.calibration, options.terms),
      calibration_(std::move(options.calibration)),
      terms_(options.terms),
      blocks_(model_.num_blocks()),
      world_(spec.cluster.world_size()),
      noise_(spec.scenario.noise) {
  validate_scenario(scenario_, spec.cluster);
  std::stable_sort(scenario_.events.begin(), scenario_.events.end(),
                   [](const auto& a, const auto& b) { return a.step < b.step; });
  for (const auto& e : scenario_.events) {
    event_steps_.push_back(e.step);
    rank_events_ = rank_events_ || e.kind == EventKind::kStraggler ||
                   e.kind == EventKind::kRankLoss || e.kind == EventKind::kRankJoin;
  }
  event_steps_.erase(std::unique(event_steps_.begin(), event_steps_.end()), event_steps_.end());
  for (const auto& s : catalog_.entries()) entry_of(s);
  dp_entry_ = entry_of(Strategy::dp());
  idle_power_w_ = cost_.head_cost().idle_power_w;
  plan_ = resolve_plan(spec.initial_plan, model_, spec.cluster);
  cost_.set_conditions(conditions_at(scenario_.state_at(0, spec.cluster)));
  configure(resolved_pipeline(plan_));
  install(0);
  group_act_ = static_cast<int>(act_keys_.size());
  group_param_ = static_cast<int>(param_keys_.size());
  if (options.costs) join(std::move(options.costs));
  reset(spec.seeds.empty() ? 0 : spec.seeds.front(), plan_);
}

Conditions SimRun::conditions_at(const ScenarioState& state) const {
  Conditions c;
  c.model = model_;
  c.link_factor = state.link_factor;
  c.slowdown = state.slowdown;
  if (state.seq > 0) c.model.seq = state.seq;
  if (state.global_batch > 0) c.model.global_batch = state.global_batch;
  return c;
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
  m.energy_j += idle_power_w_ * restart;
}

Pipeline SimRun::resolved_pipeline(const Plan& plan) const {
  Pipeline p = plan.pipeline;
  // Under the conditions now: a batch event changes Megatron-LM's m (plan_micro_batches).
  p.micro_batches = plan_micro_batches(plan, cost_.model(), world_);
  return p;
}

bool SimRun::configure(const Pipeline& pipe) const {
  if (!stage_cost_.empty() && pipe == pipe_) return false;
  const bool same_stages = !stage_cost_.empty() && pipe.stages == pipe_.stages;
  const bool split_only = same_stages && pipe.micro_batches == pipe_.micro_batches &&
                          pipe.schedule == pipe_.schedule &&
                          pipe.virtual_stages == pipe_.virtual_stages &&
                          pipe.shares == pipe_.shares && pipe.context == pipe_.context;
  pipe_ = pipe;
  const int p = std::max(1, pipe.stages);
  stage_world_ = world_ / p;
  Plan shape;
  shape.blocks.assign(blocks_, Strategy::dp());
  shape.pipeline = pipe;
  if (split_only) {
    // A moved boundary: stage cost models, in-flight counts and caches hold as they are.
    block_stage_ = shape.block_stages();
    current_mem_ = -1;
    return true;
  }
  if (!same_stages) {
    stage_cost_.clear();
    for (int s = 0; s < p; ++s)
      stage_cost_.emplace_back(cost_.cluster().slice(s * stage_world_, stage_world_),
                               calibration_, terms_);
    block_cache_.assign(2 * p, entries_.size());
    memory_cache_.assign(2 * p, std::vector<MemorySlot>(entries_.size()));
    redist_cache_.assign(p, std::vector<TransferSlot>(size_t(act_stride_) * act_stride_));
    repart_cache_.assign(2 * p, std::vector<TransferSlot>(size_t(param_stride_) * param_stride_));
  }
  block_stage_ = shape.block_stages();
  stage_capacity_.assign(p, 0.0);
  for (int s = 0; s < p; ++s) {
    const ClusterSpec& sc = stage_cost_[s].cluster();
    double cap = sc.device_of(0).memory_bytes;
    for (int r = 0; r < stage_world_; ++r) cap = std::min(cap, sc.device_of(r).memory_bytes);
    stage_capacity_[s] = cap;
  }
  in_flight_.resize(p);
  for (int s = 0; s < p; ++s)
    in_flight_[s] = micro_batches_in_flight(pipe.schedule, p, pipe.micro_batches,
                                            pipe.virtual_stages, s);
  // The LM head's activations (fp32 logits) live as long as the last stage's blocks': all m
  // micro-batches under GPipe, one under 1F1B (min(p − s, m) at s = p − 1). The interleaved
  // schedule's last model chunk is counted once (its head runs each micro-batch's backward
  // right after the forward, as 1F1B's last stage does).
  head_in_flight_ = pipe.schedule == Schedule::kInterleaved ? 1.0 : in_flight_[p - 1];
  // Per-micro-batch conditions on every stage.
  Conditions c = cost_.conditions();
  // Context parallelism prices parts of sequences (plan.h context_model), then per micro-batch.
  c.model = micro_batch_model(context_model(c.model, pipe.context, world_), pipe.micro_batches,
                              world_);
  // Uneven data shares (core/data_shares.h): each rank's share of the even batch.
  const std::vector<double> work =
      share_work(pipe.shares, effective_global_batch(cost_.model(), world_), world_, p);
  for (int s = 0; s < p; ++s) {
    Conditions cs = c;
    cs.slowdown.assign(c.slowdown.begin() + s * stage_world_,
                       c.slowdown.begin() + (s + 1) * stage_world_);
    if (!pipe.shares.empty())
      cs.work.assign(work.begin() + s * stage_world_, work.begin() + (s + 1) * stage_world_);
    stage_cost_[s].set_conditions(cs);
  }
  ++gen_;
  // What the transfer caches depend on (see transfer_gen_): the stages, the micro-batch's shape
  // and the links.
  std::vector<double> sig = {double(p), double(c.model.seq), double(c.model.global_batch),
                             double(c.model.micro_batch), double(pipe.micro_batches)};
  sig.insert(sig.end(), c.link_factor.begin(), c.link_factor.end());
  if (!same_stages || sig != transfer_sig_) {
    ++transfer_gen_;
    transfer_sig_ = std::move(sig);
  }
  current_mem_ = -1;
  return true;
}

void SimRun::install(int step) {
  installed_phase_ = static_cast<int>(
      std::upper_bound(event_steps_.begin(), event_steps_.end(), step) - event_steps_.begin());
  const ScenarioState state = scenario_.state_at(step, cost_.cluster());
  lost_ = state.lost;
  any_lost_ = std::find(lost_.begin(), lost_.end(), 1) != lost_.end();
  if (replaced_.size() != lost_.size()) replaced_.assign(lost_.size(), 0);
  for (int r = 0; r < world_; ++r)
    if (!lost_[r]) replaced_[r] = 0;  // back in service: no spare stands in any more
  const Conditions c = conditions_at(state);
  const Conditions& now = cost_.conditions();
  const bool same = gen_ > 1 && now.model.seq == c.model.seq &&
                    now.model.global_batch == c.model.global_batch &&
                    now.link_factor == c.link_factor && now.slowdown == c.slowdown;
  if (same) return;
  cost_.set_conditions(c);
  const Pipeline pipe = pipe_;
  pipe_.micro_batches = -1;  // force configure() to reinstall the stages' conditions
  configure(pipe);
  max_slowdown_ = *std::max_element(c.slowdown.begin(), c.slowdown.end());
}

void SimRun::draw_link_measurement() {
  const auto& f = cost_.conditions().link_factor;
  measured_link_.resize(f.size());
  for (size_t l = 0; l < f.size(); ++l) measured_link_[l] = f[l] * noise_.next();
}

void SimRun::reset(uint64_t seed, const Plan& initial) {
  replaced_.assign(world_, 0);
  install(0);  // shape validity depends on the conditions (seq length)
  const Pipeline before = pipe_;
  std::vector<int> idx;
  const std::string err = resolve(initial, idx);
  if (!err.empty()) {
    configure(before);
    install(step_);  // leave the episode as it was
    throw std::invalid_argument("initial plan: " + err);
  }
  noise_.seed(seed);
  step_ = 0;
  idx_ = idx;
  idx_keys_.resize(idx_.size());
  for (size_t b = 0; b < idx_.size(); ++b) idx_keys_[b] = entry_keys_[idx_[b]];
  idx_gen_ = gen_;
  current_mem_ = -1;
  Pipeline held = held_pipeline(pipe_, initial.pipeline);  // before: `initial` may be plan_
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
  const bool same_pipe = plan.pipeline == pipe_;
  if (!same_pipe) before_stage_ = block_stage_;
  const int before_world = stage_world_;  // resolve() installs the new pipeline's
  const std::string err = resolve(plan, scratch_);
  if (!err.empty()) {
    m.ok = false;
    m.error = "sim step " + std::to_string(step_) + ": " + err;
    return;
  }
  evaluate(scratch_, &idx_, same_pipe ? block_stage_ : before_stage_, before_world, &noise_, m);
  spare_scratch_.clear();
  if (needs_spare(pipe_, &spare_scratch_)) {
    charge_restart(m);
    for (int r : spare_scratch_) replaced_[r] = 1;
  }
  for (int b = 0; b < blocks_; ++b) {
    if (scratch_[b] == idx_[b]) continue;
    plan_.blocks[b] = entries_[scratch_[b]];
    idx_keys_[b] = entry_keys_[scratch_[b]];
  }
  plan_.pipeline = held_pipeline(pipe_, plan.pipeline);  // a copy first: `plan` may be plan_
  idx_.swap(scratch_);
  idx_gen_ = gen_;
  current_mem_ = *std::max_element(m.peak_memory_bytes.begin(), m.peak_memory_bytes.end());
  ++step_;
  if (std::binary_search(event_steps_.begin(), event_steps_.end(), step_))
    install(step_);
  draw_link_measurement();
}

void SimRun::context_into(RunContext& c) const {
  c.step = step_;
  c.phase = static_cast<int>(
      std::upper_bound(event_steps_.begin(), event_steps_.end(), step_) - event_steps_.begin());
  c.num_phases = 1 + static_cast<int>(event_steps_.size());
  c.link_bw_factor.assign(measured_link_.begin(), measured_link_.end());
  c.seq_factor = double(cost_.model().seq) / model_.seq;
  c.max_compute_slowdown = max_slowdown_;
  if (rank_events_) {  // without straggler or loss events every rank is nominal: left empty
    const std::vector<double>& slow = cost_.conditions().slowdown;
    c.rank_slowdown.assign(slow.begin(), slow.end());
    c.rank_alive.resize(world_);
    for (int r = 0; r < world_; ++r) c.rank_alive[r] = !lost_[r] || replaced_[r];
  } else {
    c.rank_slowdown.clear();
    c.rank_alive.clear();
  }
  c.memory_capacity = *std::min_element(stage_capacity_.begin(), stage_capacity_.end());
}

std::optional<Measurement> SimRun::estimate(const Plan& plan) const {
  Measurement m;
  std::vector<int> idx;
  const Pipeline before = pipe_;
  const bool same_pipe = plan.pipeline == pipe_;
  if (!same_pipe) before_stage_ = block_stage_;
  const int before_world = stage_world_;  // resolve() installs the new pipeline's
  const std::string err = resolve(plan, idx);
  if (err.empty()) {
    evaluate(idx, &idx_, same_pipe ? block_stage_ : before_stage_, before_world, nullptr, m);
    if (needs_spare(pipe_)) charge_restart(m);
  }
  configure(before);  // the plan in force keeps its stages
  if (!err.empty()) {
    m.ok = false;
    m.error = "sim estimate: " + err;
  }
  return m;
}

bool SimRun::fits(const Plan& plan) const {
  // The env asks on every step that changes several blocks (partition_env.h): the plan in
  // force's pipeline is kept without a copy, the entries in a kept buffer.
  const bool same_pipe = plan.pipeline.micro_batches > 0 && plan.pipeline == pipe_;
  std::optional<Pipeline> before;
  if (!same_pipe) before = pipe_;
  bool ok = resolve(plan, fits_idx_).empty();
  if (ok) {
    stage_memory_only(fits_idx_, stage_scratch_);
    for (size_t s = 0; s < stage_scratch_.size(); ++s)
      ok = ok && !(stage_scratch_[s] > stage_capacity_[s]);
  }
  if (before) configure(*before);  // the plan in force keeps its stages
  return ok;
}

IterationBreakdown SimRun::breakdown(const Plan& plan) const {
  IterationBreakdown bd;
  std::vector<int> idx;
  const Pipeline before = pipe_;
  const std::string err = resolve(plan, idx);
  if (!err.empty()) {
    configure(before);
    throw std::invalid_argument("breakdown: " + err);
  }
  Measurement m;
  evaluate(idx, nullptr, block_stage_, stage_world_, nullptr, m, &bd);
  const int p = static_cast<int>(stage_cost_.size());
  bd.pipeline = pipe_;
  bd.bubble_fraction = p > 1 ? bubble_fraction(p, pipe_.micro_batches, pipe_.schedule ==
                                   Schedule::kInterleaved ? pipe_.virtual_stages : 1)
                             : 0.0;
  bd.block_stage = block_stage_;
  stage_memory(idx, stage_scratch_);
  for (int s = 0; s < p; ++s) {
    StageTimes& st = bd.stages[s];
    st.first_rank = s * stage_world_, st.ranks = stage_world_;
    st.in_flight = in_flight_[s];
    st.peak_memory_bytes = stage_scratch_[s], st.capacity_bytes = stage_capacity_[s];
  }
  for (int b = 0; b < blocks_; ++b) {
    StageTimes& st = bd.stages[block_stage_[b]];
    if (st.blocks++ == 0) st.first_block = b;
    const int stage = block_stage_[b];
    bd.blocks.push_back(stage_cost_[stage].block_cost(ModelSpec::block_kind(b), entries_[idx[b]],
                                                      true));
    const bool inside = b > 0 && block_stage_[b - 1] == stage;
    bd.redistribution_s.push_back(inside ? redistribution(stage, idx[b - 1], idx[b]).time : 0.0);
  }
  if (act_id_[idx[blocks_ - 1]] != act_id_[dp_entry_])
    bd.head_redistribution_s = redistribution(p - 1, idx[blocks_ - 1], dp_entry_).time;
  configure(before);  // the plan in force keeps its stages
  return bd;
}

std::unique_ptr<TrainingRun> SimRun::clone() const { return std::make_unique<SimRun>(*this); }

std::unique_ptr<TrainingRun> SimRun::clone_holding(const Plan& plan) const {
  auto c = std::make_unique<SimRun>(*this);
  std::vector<int> idx;
  const std::string err = c->resolve(plan, idx);  // installs the plan's pipeline and shares
  if (!err.empty()) throw std::invalid_argument("clone_holding: " + err);
  c->idx_ = idx;
  c->idx_keys_.resize(idx.size());
  for (size_t b = 0; b < idx.size(); ++b) c->idx_keys_[b] = c->entry_keys_[idx[b]];
  c->idx_gen_ = c->gen_;
  c->current_mem_ = -1;
  c->plan_ = plan;
  c->plan_.pipeline = held_pipeline(c->pipe_, plan.pipeline);
  return c;
}

}  // namespace shardgym
