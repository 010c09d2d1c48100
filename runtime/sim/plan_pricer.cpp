// PlanPricer: construction, the conditions and stages installed, the strategies known to the
// caches and the cache fills (plan_pricer_evaluate.cpp prices a plan from them).
#include "runtime/sim/plan_pricer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

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

void PlanPricer::set_conditions(const Conditions& c, int phase) {
  phase_ = phase;
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
  if (group_) {  // outside the catalog (registered after join()): the pricer's own slots
    for (auto& row : own_block_) row.resize(entries_.size() - group_entries_);
    for (auto& row : own_memory_) row.resize(entries_.size() - group_entries_);
  }
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

const PlanPricer::BlockSlot& PlanPricer::fill_block(int stage, int kind, int entry) {
  const BlockCost c = stage_cost_[stage].block_cost(
      kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[entry]);
  BlockFigures f;
  f.fwd = c.fwd_s, f.bwd = c.bwd_s, f.comm = c.comm_s;
  f.busy_j = c.busy_energy_j, f.link_j = c.link_energy_j;
  f.grad_sync = c.grad_sync_s, f.param_gather = c.param_gather_s, f.optimizer = c.optimizer_s;
  f.params = c.params_per_rank;
  f.host = c.host_s;
  const RuntimeCalibration& cal = cost_.cluster().calibration;
  f.state = c.state_bytes * cal.memory_state_scale;
  f.state_moved = c.state_bytes;
  f.act = c.activation_bytes * cal.memory_activation_scale;
  f.act_prev = c.activation_bytes_prev_recompute * cal.memory_activation_scale;
  if (entry < group_entries_)
    return publish(group_block_[size_t(2 * stage + kind) * group_entries_ + entry], f);
  BlockSlot& s = own_block_[2 * stage + kind][entry - group_entries_];
  static_cast<BlockFigures&>(s) = f;
  s.gen.store(gen_, std::memory_order_relaxed);
  return s;
}

PlanPricer::MemoryFigures PlanPricer::block_memory(int stage, int kind, int entry) {
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
  const RuntimeCalibration& cal = cost_.cluster().calibration;
  MemoryFigures f;
  f.state = c.state_bytes * cal.memory_state_scale;  // as fill_block has them
  f.act = c.activation_bytes * cal.memory_activation_scale;
  f.act_prev = c.activation_bytes_prev_recompute * cal.memory_activation_scale;
  if (shared) return publish(m, f);
  static_cast<MemoryFigures&>(m) = f;
  m.gen.store(gen_, std::memory_order_relaxed);
  return m;
}

// ------------------------------------------------------------------------------ shared costs

class SimCostShare {
 public:
  // The slots of one set of conditions: redistribution per stage over the catalog's
  // activation layouts, repartition per (stage, kind) over its parameter layouts.
  struct Tables {
    Tables(int stages, int act, int param)
        : redist(new PlanPricer::TransferSlot[size_t(stages) * act * act]),
          repart(new PlanPricer::TransferSlot[size_t(2 * stages) * param * param]) {}
    std::unique_ptr<PlanPricer::TransferSlot[]> redist, repart;
  };
  std::mutex mutex;
  // By (scenario phase, stages, micro-batches, schedule, virtual stages): what moving
  // activations and state depends on besides the spec (a moved boundary, the data shares and
  // the ranks' speeds change none of it; layout.h).
  std::map<std::array<int, 5>, std::unique_ptr<Tables>> tables;
  // By what the stages' cost models are made of besides the spec (PlanPricer::bind_rows; a
  // moved boundary changes none of it). Held by the runs bound to them; past kMaxRows sets
  // the index starts over (the runs keep theirs).
  static constexpr size_t kMaxRows = 1024;
  std::map<std::vector<double>, std::shared_ptr<PlanPricer::PriceRows>> rows;
  // What the first run that joined was built from, for the check of the others.
  bool joined = false;
  int blocks = 0, world = 0;
  std::string model;
  std::vector<Strategy> catalog;
  std::vector<ScenarioEvent> events;
  std::vector<uint32_t> act_keys;
  std::vector<uint64_t> param_keys;
  std::vector<double> probe;  // cost_probe() of the first
};

namespace {

// A few figures of a cost model under step 0's conditions that the devices, links,
// calibration and cost terms all enter (the LM head; of each kind a data-parallel block and
// the catalog's last entry valid for it, whose collectives cross the links): runs whose
// figures differ cannot share costs.
std::vector<double> cost_probe(const CostModel& cost, const std::vector<Strategy>& catalog,
                               int world) {
  const HeadCost h = cost.head_cost();
  std::vector<double> out = {h.compute_s, h.grad_sync_s, h.memory_bytes, h.idle_power_w,
                             h.host_s,    h.loop_host_s, h.iteration_s,  h.memory_capacity};
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    std::vector<Strategy> probed = {Strategy::dp()};
    for (auto it = catalog.rbegin(); it != catalog.rend(); ++it)
      if (strategy_invalid_reason(*it, cost.model(), kind, world).empty()) {
        probed.push_back(*it);
        break;
      }
    for (const Strategy& st : probed) {
      const BlockCost b = cost.block_cost(kind, st);
      for (double v : {b.fwd_s, b.bwd_s, b.comm_s, b.grad_sync_s, b.optimizer_s, b.host_s,
                       b.state_bytes, b.activation_bytes})
        out.push_back(v);
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<SimCostShare> new_sim_cost_share() { return std::make_shared<SimCostShare>(); }

void PlanPricer::join(std::shared_ptr<SimCostShare> share,
                      const std::vector<ScenarioEvent>& events) {
  const std::vector<uint32_t> act(act_keys_.begin(), act_keys_.begin() + group_act_);
  const std::vector<uint64_t> param(param_keys_.begin(), param_keys_.begin() + group_param_);
  std::vector<double> probe = cost_probe(cost_, catalog_.entries(), world_);
  {
    std::lock_guard<std::mutex> lock(share->mutex);
    SimCostShare& s = *share;
    if (!s.joined) {
      s.joined = true;
      s.blocks = blocks_, s.world = world_, s.model = model_.name;
      s.catalog = catalog_.entries(), s.events = events;
      s.act_keys = act, s.param_keys = param, s.probe = std::move(probe);
    } else {
      auto differ = [](const std::string& what) {
        throw std::invalid_argument("SimOptions::costs: this run differs from the first in " +
                                    what + "; only runs built from the same spec share costs");
      };
      if (s.blocks != blocks_ || s.world != world_ || s.model != model_.name)
        differ("model or world");
      if (s.catalog != catalog_.entries()) differ("catalog");
      // The shared tables are keyed by phase: two instances of a task's draws have other
      // events in the same phases.
      if (s.events != events) differ("scenario events");
      if (s.act_keys != act || s.param_keys != param) differ("layouts");
      if (s.probe != probe) differ("cluster, calibration or cost terms (its costs)");
    }
  }
  group_ = std::move(share);
  group_tables_gen_ = 0;
}

void PlanPricer::bind_group_tables() {
  const std::array<int, 5> key = {phase_, stages_, pipe_.micro_batches,
                                  static_cast<int>(pipe_.schedule), pipe_.virtual_stages};
  std::lock_guard<std::mutex> lock(group_->mutex);
  std::unique_ptr<SimCostShare::Tables>& t = group_->tables[key];
  if (!t) t = std::make_unique<SimCostShare::Tables>(key[1], group_act_, group_param_);
  group_redist_ = t->redist.get();
  group_repart_ = t->repart.get();
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
  std::shared_ptr<PriceRows> rows;
  {
    std::lock_guard<std::mutex> lock(group_->mutex);
    auto it = group_->rows.find(key);
    if (it != group_->rows.end()) rows = it->second;
  }
  if (!rows) {  // built outside the lock; a run that built the same first wins
    rows = std::make_shared<PriceRows>(stage_models(micro), group_entries_);
    std::lock_guard<std::mutex> lock(group_->mutex);
    auto& index = group_->rows;
    if (index.size() >= SimCostShare::kMaxRows) index.clear();
    rows = index.emplace(std::move(key), std::move(rows)).first->second;
  }
  rows_ = std::move(rows);
  stage_cost_ = rows_->stages.data();
  stages_ = static_cast<int>(rows_->stages.size());
  group_block_ = rows_->block.get();
  group_memory_ = rows_->memory.get();
}

template <typename Figures>
const PlanPricer::Slot<Figures>& PlanPricer::publish(Slot<Figures>& s, const Figures& f) {
  std::lock_guard<std::mutex> lock(rows_->mutex);
  if (!s.gen.load(std::memory_order_relaxed)) {  // else another run wrote the same figures
    static_cast<Figures&>(s) = f;
    s.gen.store(1, std::memory_order_release);
  }
  return s;
}

template <typename Cost>
const PlanPricer::TransferSlot& PlanPricer::publish(TransferSlot& s, Cost&& cost) {
  const TransferCost c = cost();
  std::lock_guard<std::mutex> lock(group_->mutex);
  if (!s.gen.load(std::memory_order_relaxed)) {  // else another run wrote the same figures
    s.set(c);
    s.gen.store(1, std::memory_order_release);
  }
  return s;
}

const PlanPricer::TransferSlot& PlanPricer::fill_redistribution(int stage, int from, int to) {
  const int a = act_id_[from], z = act_id_[to];
  auto cost = [&] { return stage_cost_[stage].redistribution(entries_[from], entries_[to]); };
  if (a < group_act_ && z < group_act_)
    return publish(group_slots(stage, -1)[size_t(a) * group_act_ + z], cost);
  TransferSlot& s = redist_cache_[stage][size_t(a) * act_stride_ + z];
  const TransferCost c = cost();
  s.set(c);
  s.gen.store(transfer_gen_, std::memory_order_relaxed);
  return s;
}

const PlanPricer::TransferSlot& PlanPricer::repartition(int stage, int kind, int from, int to) {
  const int a = param_id_[from], z = param_id_[to];
  auto cost = [&] {
    return stage_cost_[stage].repartition(kind == 0 ? BlockKind::kAttention : BlockKind::kMlp,
                                          entries_[from], entries_[to]);
  };
  if (a < group_param_ && z < group_param_) {
    TransferSlot& s = group_slots(stage, kind)[size_t(a) * group_param_ + z];
    return s.gen.load(std::memory_order_acquire) ? s : publish(s, cost);
  }
  TransferSlot& s = repart_cache_[2 * stage + kind][size_t(a) * param_stride_ + z];
  if (s.gen.load(std::memory_order_relaxed) == transfer_gen_) return s;
  const TransferCost c = cost();
  s.set(c);
  s.gen.store(transfer_gen_, std::memory_order_relaxed);
  return s;
}

}  // namespace shardgym
