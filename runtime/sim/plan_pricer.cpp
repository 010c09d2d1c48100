// PlanPricer: construction, the conditions and stages installed, the strategies known to the
// caches and the cache fills (plan_pricer_evaluate.cpp prices a plan from them).
#include "runtime/sim/plan_pricer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "runtime/core/cost.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/live_memory.h"
#include "runtime/core/placement.h"
#include "runtime/sim/layout.h"
#include "runtime/sim/pipeline_model.h"

namespace shardgym {
namespace {

size_t hash_slot(uint64_t key, size_t mask) {
  return size_t((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

// Dense id of `key` in `keys`, appended if new.
template <typename Key>
int dense_id(std::vector<Key>& keys, Key key) {
  auto it = std::find(keys.begin(), keys.end(), key);
  if (it != keys.end()) return static_cast<int>(it - keys.begin());
  keys.push_back(key);
  return static_cast<int>(keys.size()) - 1;
}

}  // namespace

void check_sim_spec(const ModelSpec& model, const ClusterSpec& cluster) {
  const std::string bad_model = model.validate();
  if (!bad_model.empty()) throw std::invalid_argument("model '" + model.name + "': " + bad_model);
  const std::string bad_cluster = cluster.validate();
  if (!bad_cluster.empty())
    throw std::invalid_argument("cluster '" + cluster.name + "': " + bad_cluster);
}

namespace {

ModelSpec checked_model(const ModelSpec& m, const ClusterSpec& c) {
  check_sim_spec(m, c);
  return m;
}

}  // namespace

PlanPricer::PlanPricer(const ModelSpec& model, const ClusterSpec& cluster,
                       const CatalogOptions& catalog, SimOptions options, const Conditions& initial,
                       const Plan& plan, const std::vector<ScenarioEvent>& events)
    : model_(checked_model(model, cluster)),
      catalog_(model_, cluster.world_size(), catalog),
      cost_(cluster, options.calibration, options.terms),
      calibration_(std::move(options.calibration)),
      terms_(options.terms),
      blocks_(model_.num_blocks()),
      world_(cluster.world_size()) {
  for (const auto& s : catalog_.entries()) entry_of(s);
  dp_entry_ = entry_of(Strategy::dp());
  idle_power_w_ = cost_.head_cost().idle_power_w;
  group_entries_ = static_cast<int>(entries_.size());
  group_act_ = static_cast<int>(act_keys_.size());
  group_param_ = static_cast<int>(param_keys_.size());
  cost_.set_conditions(initial);
  // A run built without a share has one of its own: one cache scheme for both.
  join(options.costs ? std::move(options.costs) : new_sim_cost_share(), events);
  configure(resolved_pipeline(plan));
}

const CostModel& PlanPricer::stage_cost_model(int stage) const {
  if (stage < 0 || stage >= stages_)
    throw std::out_of_range("stage " + std::to_string(stage) + " outside [0, " +
                            std::to_string(stages_) + ")");
  return stage_cost_[stage];
}

double PlanPricer::min_capacity() const {
  return *std::min_element(stage_capacity_.begin(), stage_capacity_.end());
}

void PlanPricer::set_conditions(const Conditions& c) {
  const Conditions& now = cost_.conditions();
  const bool same = gen_ > 1 && now.model.seq == c.model.seq &&
                    now.model.global_batch == c.model.global_batch &&
                    now.link_factor == c.link_factor && now.slowdown == c.slowdown;
  if (same) return;
  cost_.set_conditions(c);
  const Pipeline pipe = pipe_;
  pipe_.micro_batches = -1;  // force configure() to reinstall the stages' conditions
  configure(pipe);
}

Pipeline PlanPricer::resolved_pipeline(const Plan& plan) const {
  Pipeline p = plan.pipeline;
  // Under the conditions now: a batch event changes Megatron-LM's m (plan_micro_batches).
  p.micro_batches = plan_micro_batches(plan, cost_.model(), world_);
  return p;
}

bool PlanPricer::configure(const Pipeline& pipe) {
  if (stages_ > 0 && pipe == pipe_) return false;
  const bool same_stages = stages_ > 0 && pipe.stages == pipe_.stages;
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
    own_block_.assign(2 * p, std::vector<BlockSlot>(entries_.size() - group_entries_));
    own_memory_.assign(2 * p, std::vector<MemorySlot>(entries_.size() - group_entries_));
    redist_cache_.assign(p, std::vector<TransferSlot>(size_t(act_stride_) * act_stride_));
    repart_cache_.assign(2 * p, std::vector<TransferSlot>(size_t(param_stride_) * param_stride_));
  }
  block_stage_ = shape.block_stages();
  ++gen_;
  // Per-micro-batch conditions: context parallelism prices parts of sequences (plan.h
  // context_model), then per micro-batch.
  const ModelSpec micro = micro_batch_model(
      context_model(cost_.conditions().model, pipe.context, world_), pipe.micro_batches, world_);
  bind_rows(micro);
  stage_capacity_.assign(p, 0.0);
  for (int s = 0; s < p; ++s) {
    const ClusterSpec& sc = stage_cost_[s].cluster();
    double cap = sc.device_of(0).memory_bytes;
    for (int r = 0; r < stage_world_; ++r) cap = std::min(cap, sc.device_of(r).memory_bytes);
    stage_capacity_[s] = cap;
  }
  in_flight_.resize(p);
  for (int s = 0; s < p; ++s)
    in_flight_[s] =
        micro_batches_in_flight(pipe.schedule, p, pipe.micro_batches, pipe.virtual_stages, s);
  // The LM head's activations (fp32 logits) live as long as the last stage's blocks': all m
  // micro-batches under GPipe, one under 1F1B (min(p − s, m) at s = p − 1). The interleaved
  // schedule's last model chunk is counted once (its head runs each micro-batch's backward
  // right after the forward, as 1F1B's last stage does).
  head_in_flight_ = pipe.schedule == Schedule::kInterleaved ? 1.0 : in_flight_[p - 1];
  // What the transfer caches depend on (see transfer_gen_): the stages, the micro-batch's shape
  // and the links.
  const std::vector<double>& links = cost_.conditions().link_factor;
  std::vector<double> sig = {double(p), double(micro.seq), double(micro.global_batch),
                             double(micro.micro_batch), double(pipe.micro_batches)};
  sig.insert(sig.end(), links.begin(), links.end());
  if (!same_stages || sig != transfer_sig_) {
    ++transfer_gen_;
    transfer_sig_ = std::move(sig);
  }
  current_mem_ = -1;
  return true;
}

int PlanPricer::entry_of(const Strategy& s) { return entry_of(s, strategy_key(s)); }

int PlanPricer::entry_of(const Strategy& s, uint64_t key) {
  const size_t mask = hash_slots_.size() - 1;
  if (key == kUnpackable) {
    for (size_t e = 0; e < entries_.size(); ++e)
      if (entries_[e] == s) return static_cast<int>(e);
  } else if (!hash_slots_.empty()) {
    for (size_t i = hash_slot(key, mask);; i = (i + 1) & mask) {
      const int e = hash_slots_[i];
      if (e < 0) break;
      if (hash_keys_[i] == key) return e;
    }
  }
  // A new strategy: register it, its layouts, and grow the caches.
  const int e = static_cast<int>(entries_.size());
  entries_.push_back(s);
  entry_keys_.push_back(key);
  recomputes_.push_back(s.recompute ? 1 : 0);
  act_id_.push_back(dense_id(act_keys_, activation_layout_key(s)));
  param_id_.push_back(dense_id(param_keys_, param_layout_key(s)));
  // Outside the catalog: the pricer's own slots (none before the first configure()).
  for (auto& row : own_block_) row.resize(entries_.size() - group_entries_);
  for (auto& row : own_memory_) row.resize(entries_.size() - group_entries_);
  for (auto& m : shape_ok_) m.resize(entries_.size());
  shape_gen_ = 0;
  shape_valid_ = false;
  if (static_cast<int>(act_keys_.size()) > act_stride_) {
    act_stride_ = std::max<int>(2 * act_stride_, act_keys_.size());
    for (auto& c : redist_cache_) c.assign(size_t(act_stride_) * act_stride_, TransferSlot{});
  }
  if (static_cast<int>(param_keys_.size()) > param_stride_) {
    param_stride_ = std::max<int>(2 * param_stride_, param_keys_.size());
    for (auto& c : repart_cache_) c.assign(size_t(param_stride_) * param_stride_, TransferSlot{});
  }
  if (2 * entries_.size() > hash_slots_.size()) {  // keep the table at most half full
    size_t size = 16;
    while (size < 4 * entries_.size()) size *= 2;
    hash_slots_.assign(size, -1);
    hash_keys_.assign(size, 0);
    for (int i = 0; i < static_cast<int>(entries_.size()); ++i) {
      const uint64_t k = entry_keys_[i];
      if (k == kUnpackable) continue;
      size_t j = hash_slot(k, size - 1);
      while (hash_slots_[j] >= 0) j = (j + 1) & (size - 1);
      hash_slots_[j] = i, hash_keys_[j] = k;
    }
  } else if (key != kUnpackable) {
    size_t j = hash_slot(key, mask);
    while (hash_slots_[j] >= 0) j = (j + 1) & mask;
    hash_slots_[j] = e, hash_keys_[j] = key;
  }
  return e;
}

std::string PlanPricer::why_invalid(int kind, int entry) {
  const BlockKind bk = kind == 0 ? BlockKind::kAttention : BlockKind::kMlp;
  std::string why =
      strategy_invalid_reason(entries_[entry], stage_cost_[0].model(), bk, stage_world_);
  const int n = static_cast<int>(pipe_.shares.size());
  if (why.empty() && n > 0 && (stage_world_ / n) % entries_[entry].degree() != 0)
    why = "degree " + std::to_string(entries_[entry].degree()) +
          " does not divide a data-share group of " + std::to_string(stage_world_ / n) + " ranks";
  return why;
}

void PlanPricer::ensure_shapes() {
  if (shape_gen_ == gen_) return;
  // Shapes depend on the stage's world, the share groups, the (micro-)batch and the catalog,
  // not on the shares' weights, the speeds or the links: a change of those keeps them.
  const ModelSpec& m = stage_cost_[0].model();
  const std::array<int64_t, 6> sig = {stage_world_,  int64_t(pipe_.shares.size()),
                                      m.seq,         m.global_batch,
                                      m.micro_batch, int64_t(entries_.size())};
  if (shape_valid_ && sig == shape_sig_) {
    shape_gen_ = gen_;
    return;
  }
  for (int kind = 0; kind < 2; ++kind)
    for (size_t e = 0; e < entries_.size(); ++e)
      shape_ok_[kind][e] = why_invalid(kind, static_cast<int>(e)).empty() ? 1 : 0;
  shape_gen_ = gen_;
  shape_sig_ = sig;
  shape_valid_ = true;
}

std::string PlanPricer::resolve(const Plan& plan, const PlanEntries& in_force,
                                std::vector<int>& idx) {
  if (plan.size() != blocks_)
    return "plan has " + std::to_string(plan.size()) + " blocks, the model has " +
           std::to_string(blocks_);
  // A derived m (none written) follows the plan's degrees and the batch: resolve it each time.
  if (plan.pipeline.micro_batches <= 0 || !(plan.pipeline == pipe_)) {
    if (plan.pipeline.micro_batches <= 0) {  // the derived m must exist, as validate() says
      const std::string why = micro_batch_split_reason(plan, cost_.model(), world_);
      if (!why.empty()) return why;
    }
    const Pipeline pipe = resolved_pipeline(plan);
    if (!(pipe == pipe_)) {
      // The pipeline part is checked once per new pipeline (blocks are checked below).
      Plan shape;
      shape.blocks.assign(blocks_, Strategy::dp());
      shape.pipeline = pipe;
      const std::string why = shape.parts_invalid_reason(cost_.model(), world_);
      if (!why.empty()) return why;
      configure(pipe);
    }
  }
  idx.resize(blocks_);
  // Unchanged blocks skip the hash lookup (their keys are in_force.keys, read in order) and,
  // when the plan in force passed this check under the same conditions, the shape check.
  const bool have = in_force.keys.size() == static_cast<size_t>(blocks_);
  const bool trusted = have && in_force.gen == gen_;
  for (int b = 0; b < blocks_; ++b) {
    const Strategy& s = plan.blocks[b];
    // Byte for byte the entry in force: no key needed (padding that differs only sends an
    // equal strategy the long way, through its key).
    if (have && std::memcmp(&s, &entries_[in_force.idx[b]], sizeof(Strategy)) == 0) {
      idx[b] = in_force.idx[b];
      continue;
    }
    const uint64_t key = strategy_key(s);
    const bool same = have && key != kUnpackable && key == in_force.keys[b];
    idx[b] = same ? in_force.idx[b] : entry_of(s, key);
  }
  ensure_shapes();
  for (int b = 0; b < blocks_; ++b) {
    if ((trusted && idx[b] == in_force.idx[b]) || shape_ok_[b & 1][idx[b]]) continue;
    const BlockKind kind = ModelSpec::block_kind(b);
    return "block " + std::to_string(b) + " (" + block_kind_name(kind) +
           "): " + entries_[idx[b]].to_string() + " is not valid: " + why_invalid(b & 1, idx[b]);
  }
  return "";
}

const HeadCost& PlanPricer::head() {
  if (head_gen_ != gen_) head_ = stage_cost_[stages_ - 1].head_cost(), head_gen_ = gen_;
  return head_;
}

const BlockSlot& PlanPricer::fill_block(int stage, int kind, int entry) {
  const BlockCost c = stage_cost_[stage].block_cost(
      kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[entry]);
  BlockFigures f;
  f.fwd = c.fwd_s, f.bwd = c.bwd_s, f.comm = c.comm_s;
  f.busy_j = c.busy_energy_j, f.link_j = c.link_energy_j;
  f.grad_sync = c.grad_sync_s, f.param_gather = c.param_gather_s, f.optimizer = c.optimizer_s;
  f.params = c.params_per_rank;
  f.host = c.host_s;
  const MemoryFigures m =
      memory_figures(c.state_bytes, c.activation_bytes, c.activation_bytes_prev_recompute);
  f.state = m.state, f.act = m.act, f.act_prev = m.act_prev;
  f.state_moved = c.state_bytes;
  if (entry < group_entries_)
    return publish(rows_->mutex, group_block_[size_t(2 * stage + kind) * group_entries_ + entry],
                   f);
  BlockSlot& s = own_block_[2 * stage + kind][entry - group_entries_];
  static_cast<BlockFigures&>(s) = f;
  s.gen.store(gen_, std::memory_order_relaxed);
  return s;
}

MemoryFigures PlanPricer::memory_figures(double state, double act, double act_prev) const {
  const RuntimeCalibration& cal = cost_.cluster().calibration;
  MemoryFigures f;
  f.state = state * cal.memory_state_scale;
  f.act = act * cal.memory_activation_scale;
  f.act_prev = act_prev * cal.memory_activation_scale;
  return f;
}

MemoryFigures PlanPricer::block_memory(int stage, int kind, int entry) {
  const bool shared = entry < group_entries_;
  const size_t at = size_t(2 * stage + kind) * group_entries_ + entry;
  const int own = entry - group_entries_;
  const BlockSlot& full = shared ? group_block_[at] : own_block_[2 * stage + kind][own];
  const uint32_t want = shared ? 1 : gen_;
  if (full.gen.load(std::memory_order_acquire) == want) {
    MemoryFigures f;
    f.state = full.state, f.act = full.act, f.act_prev = full.act_prev;
    return f;
  }
  MemorySlot& m = shared ? group_memory_[at] : own_memory_[2 * stage + kind][own];
  if (m.gen.load(std::memory_order_acquire) == want) return m;
  const CostModel::BlockMemory c = stage_cost_[stage].block_memory(
      kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[entry]);
  const MemoryFigures f =
      memory_figures(c.state_bytes, c.activation_bytes, c.activation_bytes_prev_recompute);
  if (shared) return publish(rows_->mutex, m, f);
  static_cast<MemoryFigures&>(m) = f;
  m.gen.store(gen_, std::memory_order_relaxed);
  return m;
}

// ------------------------------------------------------------------------------ shared costs

void PlanPricer::join(std::shared_ptr<SimCostShare> share,
                      const std::vector<ScenarioEvent>& events) {
  SimCostShare::Origin o;
  o.blocks = blocks_, o.world = world_, o.model = model_.name;
  o.catalog = catalog_.entries(), o.events = events;
  o.act_keys.assign(act_keys_.begin(), act_keys_.begin() + group_act_);
  o.param_keys.assign(param_keys_.begin(), param_keys_.begin() + group_param_);
  o.probe = cost_probe(cost_, catalog_.entries(), world_);
  share->admit(std::move(o));
  group_ = std::move(share);
  group_tables_gen_ = 0;
}

void PlanPricer::bind_group_tables() {
  std::vector<double> key = transfer_sig_;  // stages, micro-batch shape, m, links
  key.push_back(double(pipe_.schedule));
  key.push_back(double(pipe_.virtual_stages));
  TransferTables& t = group_->transfers(std::move(key), stages_, group_act_, group_param_);
  group_transfers_ = &t;
  group_redist_ = t.redist.get();
  group_repart_ = t.repart.get();
  group_tables_gen_ = gen_;
}

std::vector<CostModel> PlanPricer::stage_models(const ModelSpec& micro) const {
  const int p = std::max(1, pipe_.stages);
  Conditions c = cost_.conditions();
  c.model = micro;
  // Uneven data shares (core/data_shares.h): each rank's share of the even batch.
  const std::vector<double> work =
      share_work(pipe_.shares, effective_global_batch(cost_.model(), world_), world_, p);
  std::vector<CostModel> out;
  for (int s = 0; s < p; ++s) {
    out.emplace_back(cost_.cluster().slice(s * stage_world_, stage_world_), calibration_, terms_);
    Conditions cs = c;
    cs.slowdown.assign(c.slowdown.begin() + s * stage_world_,
                       c.slowdown.begin() + (s + 1) * stage_world_);
    if (!pipe_.shares.empty())
      cs.work.assign(work.begin() + s * stage_world_, work.begin() + (s + 1) * stage_world_);
    out.back().set_conditions(cs);
  }
  return out;
}

void PlanPricer::bind_rows(const ModelSpec& micro) {
  // What the stages' cost models are made of: the conditions (the micro-batch's shape, the
  // links, the ranks' speeds) and the pipeline but for its split.
  const Conditions& c = cost_.conditions();
  std::vector<double> key = {
      double(pipe_.stages),         double(pipe_.micro_batches), double(pipe_.schedule),
      double(pipe_.virtual_stages), double(pipe_.context),       double(micro.seq),
      double(micro.global_batch),   double(micro.micro_batch),   double(pipe_.shares.size())};
  key.insert(key.end(), pipe_.shares.begin(), pipe_.shares.end());
  key.insert(key.end(), c.link_factor.begin(), c.link_factor.end());
  key.insert(key.end(), c.slowdown.begin(), c.slowdown.end());
  rows_ = group_->find_rows(key);
  if (!rows_)  // built outside the share's lock; a run that built the same first wins
    rows_ = group_->add_rows(std::move(key),
                             std::make_shared<PriceRows>(stage_models(micro), group_entries_));
  stage_cost_ = rows_->stages.data();
  stages_ = static_cast<int>(rows_->stages.size());
  group_block_ = rows_->block.get();
  group_memory_ = rows_->memory.get();
}

const TransferSlot& PlanPricer::fill_redistribution(int stage, int from, int to) {
  const int a = act_id_[from], z = act_id_[to];
  const TransferFigures f(stage_cost_[stage].redistribution(entries_[from], entries_[to]));
  if (a < group_act_ && z < group_act_)
    return publish(group_transfers_->mutex, group_slots(stage, -1)[size_t(a) * group_act_ + z], f);
  TransferSlot& s = redist_cache_[stage][size_t(a) * act_stride_ + z];
  static_cast<TransferFigures&>(s) = f;
  s.gen.store(transfer_gen_, std::memory_order_relaxed);
  return s;
}

const TransferSlot& PlanPricer::repartition(int stage, int kind, int from, int to) {
  const int a = param_id_[from], z = param_id_[to];
  auto figures = [&] {
    return TransferFigures(stage_cost_[stage].repartition(
        kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[from], entries_[to]));
  };
  if (a < group_param_ && z < group_param_) {
    TransferSlot& s = group_slots(stage, kind)[size_t(a) * group_param_ + z];
    return s.gen.load(std::memory_order_acquire) ? s
                                                 : publish(group_transfers_->mutex, s, figures());
  }
  TransferSlot& s = repart_cache_[2 * stage + kind][size_t(a) * param_stride_ + z];
  if (s.gen.load(std::memory_order_relaxed) == transfer_gen_) return s;
  static_cast<TransferFigures&>(s) = figures();
  s.gen.store(transfer_gen_, std::memory_order_relaxed);
  return s;
}

}  // namespace shardgym
