// SimRun's caches and the evaluation of one plan (the hot path of step()).
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
#include "runtime/core/live_memory.h"
#include "runtime/core/placement.h"
#include "runtime/sim/layout.h"
#include "runtime/sim/pipeline_model.h"
#include "runtime/sim/sim_run.h"

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

SimRun::BlockRows::BlockRows(const BlockRows& o) : shared_(o.shared_) {
  for (size_t i = 0; i < o.rows_.size(); ++i)
    rows_.push_back(shared_[i] ? o.rows_[i] : std::make_shared<Row>(*o.rows_[i]));
}

void SimRun::BlockRows::assign(size_t rows, size_t entries) {
  rows_.clear();
  for (size_t i = 0; i < rows; ++i) rows_.push_back(std::make_shared<Row>(entries));
  shared_.assign(rows, 0);
}

SimRun::BlockRows::Row& SimRun::BlockRows::mut(size_t i) {
  if (shared_[i]) {
    rows_[i] = std::make_shared<Row>(*rows_[i]);
    shared_[i] = 0;
  }
  return *rows_[i];
}

void SimRun::BlockRows::share(size_t i) {
  if (shared_[i]) return;
  // The live shared rows by a hash of their bytes (slots are plain numbers; equal bytes are
  // equal slots, stamps included, so a run gets only a row it would have built itself).
  static std::mutex mutex;
  static std::unordered_multimap<uint64_t, std::weak_ptr<Row>> live;
  const Row& row = *rows_[i];
  const size_t bytes = row.size() * sizeof(BlockSlot);
  const unsigned char* c = reinterpret_cast<const unsigned char*>(row.data());
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (size_t k = 0; k < bytes; ++k) h = (h ^ c[k]) * 1099511628211ull;
  std::lock_guard<std::mutex> lock(mutex);
  auto range = live.equal_range(h);
  for (auto it = range.first; it != range.second;) {
    std::shared_ptr<Row> held = it->second.lock();
    if (!held) {
      it = live.erase(it);
      continue;
    }
    if (held->size() == row.size() && std::memcmp(held->data(), row.data(), bytes) == 0) {
      rows_[i] = std::move(held);
      shared_[i] = 1;
      return;
    }
    ++it;
  }
  live.emplace(h, rows_[i]);
  shared_[i] = 1;
}

int SimRun::entry_of(const Strategy& s) const { return entry_of(s, strategy_key(s)); }

int SimRun::entry_of(const Strategy& s, uint64_t key) const {
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
  for (size_t i = 0; i < block_cache_.size(); ++i) block_cache_.mut(i).resize(entries_.size());
  for (auto& row : memory_cache_) row.resize(entries_.size());
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

std::string SimRun::why_invalid(int kind, int entry) const {
  const BlockKind bk = kind == 0 ? BlockKind::kAttention : BlockKind::kMlp;
  std::string why =
      strategy_invalid_reason(entries_[entry], stage_cost_[0].model(), bk, stage_world_);
  const int n = static_cast<int>(pipe_.shares.size());
  if (why.empty() && n > 0 && (stage_world_ / n) % entries_[entry].degree() != 0)
    why = "degree " + std::to_string(entries_[entry].degree()) +
          " does not divide a data-share group of " + std::to_string(stage_world_ / n) + " ranks";
  return why;
}

void SimRun::ensure_shapes() const {
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

std::string SimRun::resolve(const Plan& plan, std::vector<int>& idx) const {
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
  // Unchanged blocks skip the hash lookup (their keys are idx_keys_, read in order) and,
  // when the plan in force passed this check under the same conditions, the shape check.
  const bool have = idx_keys_.size() == static_cast<size_t>(blocks_);
  const bool trusted = have && idx_gen_ == gen_;
  for (int b = 0; b < blocks_; ++b) {
    const Strategy& s = plan.blocks[b];
    // Byte for byte the entry in force: no key needed (padding that differs only sends an
    // equal strategy the long way, through its key).
    if (have && std::memcmp(&s, &entries_[idx_[b]], sizeof(Strategy)) == 0) {
      idx[b] = idx_[b];
      continue;
    }
    const uint64_t key = strategy_key(s);
    const bool same = have && key != kUnpackable && key == idx_keys_[b];
    idx[b] = same ? idx_[b] : entry_of(s, key);
  }
  ensure_shapes();
  for (int b = 0; b < blocks_; ++b) {
    if ((trusted && idx[b] == idx_[b]) || shape_ok_[b & 1][idx[b]]) continue;
    const BlockKind kind = ModelSpec::block_kind(b);
    return "block " + std::to_string(b) + " (" + block_kind_name(kind) +
           "): " + entries_[idx[b]].to_string() + " is not valid: " + why_invalid(b & 1, idx[b]);
  }
  return "";
}

const HeadCost& SimRun::head() const {
  if (head_gen_ != gen_) head_ = stage_cost_.back().head_cost(), head_gen_ = gen_;
  return head_;
}

const SimRun::BlockSlot& SimRun::fill_block(int stage, int kind, int entry) const {
  BlockSlot& s = block_cache_.mut(2 * stage + kind)[entry];
  const BlockCost c = stage_cost_[stage].block_cost(
      kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[entry]);
  s.fwd = c.fwd_s, s.bwd = c.bwd_s, s.comm = c.comm_s;
  s.busy_j = c.busy_energy_j, s.link_j = c.link_energy_j;
  s.grad_sync = c.grad_sync_s, s.param_gather = c.param_gather_s, s.optimizer = c.optimizer_s;
  s.params = c.params_per_rank;
  s.host = c.host_s;
  const RuntimeCalibration& cal = cost_.cluster().calibration;
  s.state = c.state_bytes * cal.memory_state_scale;
  s.state_moved = c.state_bytes;
  s.act = c.activation_bytes * cal.memory_activation_scale;
  s.act_prev = c.activation_bytes_prev_recompute * cal.memory_activation_scale;
  s.gen = gen_;
  return s;
}

// ------------------------------------------------------------------ shared transfer costs

class SimCostShare {
 public:
  // The slots of one set of conditions: redistribution per stage over the catalog's
  // activation layouts, repartition per (stage, kind) over its parameter layouts.
  struct Tables {
    Tables(int stages, int act, int param)
        : redist(new SimRun::TransferSlot[size_t(stages) * act * act]),
          repart(new SimRun::TransferSlot[size_t(2 * stages) * param * param]) {}
    std::unique_ptr<SimRun::TransferSlot[]> redist, repart;
  };
  std::mutex mutex;
  // By (scenario phase, stages, micro-batches, schedule, virtual stages): what the stages'
  // cost models depend on besides the spec (a moved boundary changes none of them).
  std::map<std::array<int, 5>, std::unique_ptr<Tables>> tables;
  // What the first run that joined was built from, for the check of the others.
  bool joined = false;
  int blocks = 0, world = 0;
  std::string model;
  std::vector<Strategy> catalog;
  std::vector<ScenarioEvent> events;
  std::vector<uint32_t> act_keys;
  std::vector<uint64_t> param_keys;
};

std::shared_ptr<SimCostShare> new_sim_cost_share() { return std::make_shared<SimCostShare>(); }

void SimRun::join(std::shared_ptr<SimCostShare> share) {
  const std::vector<uint32_t> act(act_keys_.begin(), act_keys_.begin() + group_act_);
  const std::vector<uint64_t> param(param_keys_.begin(), param_keys_.begin() + group_param_);
  {
    std::lock_guard<std::mutex> lock(share->mutex);
    SimCostShare& s = *share;
    if (!s.joined) {
      s.joined = true;
      s.blocks = blocks_, s.world = world_, s.model = model_.name;
      s.catalog = catalog_.entries(), s.events = scenario_.events;
      s.act_keys = act, s.param_keys = param;
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
      if (s.events != scenario_.events) differ("scenario events");
      if (s.act_keys != act || s.param_keys != param) differ("layouts");
    }
  }
  group_ = std::move(share);
  group_tables_gen_ = 0;
}

void SimRun::bind_group_tables() const {
  const std::array<int, 5> key = {installed_phase_, static_cast<int>(stage_cost_.size()),
                                  pipe_.micro_batches, static_cast<int>(pipe_.schedule),
                                  pipe_.virtual_stages};
  std::lock_guard<std::mutex> lock(group_->mutex);
  std::unique_ptr<SimCostShare::Tables>& t = group_->tables[key];
  if (!t) t = std::make_unique<SimCostShare::Tables>(key[1], group_act_, group_param_);
  group_redist_ = t->redist.get();
  group_repart_ = t->repart.get();
  group_tables_gen_ = gen_;
}

template <typename Cost>
const SimRun::TransferSlot& SimRun::publish(TransferSlot& s, Cost&& cost) const {
  const TransferCost c = cost();
  std::lock_guard<std::mutex> lock(group_->mutex);
  if (!s.gen.load(std::memory_order_relaxed)) {  // else another run wrote the same figures
    s.set(c);
    s.gen.store(1, std::memory_order_release);
  }
  return s;
}

const SimRun::TransferSlot& SimRun::fill_redistribution(int stage, int from, int to) const {
  const int a = act_id_[from], z = act_id_[to];
  auto cost = [&] { return stage_cost_[stage].redistribution(entries_[from], entries_[to]); };
  if (group_ && a < group_act_ && z < group_act_)
    return publish(group_slots(stage, -1)[size_t(a) * group_act_ + z], cost);
  TransferSlot& s = redist_cache_[stage][size_t(a) * act_stride_ + z];
  const TransferCost c = cost();
  s.set(c);
  s.gen.store(transfer_gen_, std::memory_order_relaxed);
  return s;
}

const SimRun::TransferSlot& SimRun::repartition(int stage, int kind, int from, int to) const {
  const int a = param_id_[from], z = param_id_[to];
  auto cost = [&] {
    return stage_cost_[stage].repartition(kind == 0 ? BlockKind::kAttention : BlockKind::kMlp,
                                          entries_[from], entries_[to]);
  };
  if (group_ && a < group_param_ && z < group_param_) {
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

void SimRun::edge_memory(const std::vector<int>& idx, std::vector<double>& out) const {
  const int p = static_cast<int>(stage_cost_.size());
  // Embedding on the first stage, LM head and its fp32 logits on the last, both split over
  // the vocabulary by the tensor-parallel degree of the stage's edge block (Megatron-LM's
  // VocabParallelEmbedding and column-parallel output layer); the logits as HeadCost has them,
  // for each micro-batch in flight on the last stage.
  const int t_first = model_.vocab_parallel ? entries_[idx[0]].degree() : 1;
  const int t_last = model_.vocab_parallel ? entries_[idx[blocks_ - 1]].degree() : 1;
  if (edge_gen_ != gen_ || edge_t_[0] != t_first || edge_t_[1] != t_last) {
    const ModelSpec& mm = stage_cost_[0].model();
    const double total = double(model_.embedding_params());
    const double emb = double(model_.input_embedding_params());
    const double head_act = head().memory_bytes - total * mm.state_bytes_per_param();
    const RuntimeCalibration& cal = cost_.cluster().calibration;
    const double ms = cal.memory_state_scale, ma = cal.memory_activation_scale;
    edge_[0] = emb / t_first * mm.state_bytes_per_param(stage_world_ / t_first) * ms;
    edge_[1] = (total - emb) / t_last * mm.state_bytes_per_param(stage_world_ / t_last) * ms;
    edge_act_ = head_act * ma;
    edge_t_[0] = t_first, edge_t_[1] = t_last, edge_gen_ = gen_;
  }
  out[0] += edge_[0];
  out[p - 1] += edge_[1] + head_in_flight_ * edge_act_;
  const double base = cost_.cluster().calibration.memory_base_bytes +
                     cost_.cluster().max_workspace_bytes();
  if (base != 0)
    for (int s = 0; s < p; ++s) out[s] += base;
}

void SimRun::live_stage_memory(const std::vector<int>& idx, std::vector<double>& out) const {
  live_plan_.blocks.resize(blocks_);
  for (int b = 0; b < blocks_; ++b) live_plan_.blocks[b] = entries_[idx[b]];
  live_plan_.pipeline = pipe_;
  const std::vector<MemoryEstimate> stages =
      live_stage_memory_estimates(cost_.model(), live_plan_, world_, pipe_.micro_batches);
  out.assign(stage_cost_.size(), 0.0);
  const double workspace = cost_.cluster().max_workspace_bytes();
  for (size_t s = 0; s < out.size(); ++s)
    out[s] = stages[std::min(s, stages.size() - 1)].total() + workspace;
}

void SimRun::stage_memory(const std::vector<int>& idx, std::vector<double>& out) const {
  if (model_.live_layers) return live_stage_memory(idx, out);
  out.assign(stage_cost_.size(), 0.0);
  edge_memory(idx, out);
  for (int b = 0; b < blocks_; ++b) {
    const int st = block_stage_[b];
    const BlockSlot& c = block(st, b & 1, idx[b]);
    const bool after_recompute = (b & 1) && recomputes_[idx[b - 1]];
    out[st] += c.state + in_flight_[st] * (after_recompute ? c.act_prev : c.act);
  }
}

void SimRun::stage_memory_only(const std::vector<int>& idx, std::vector<double>& out) const {
  if (model_.live_layers) return live_stage_memory(idx, out);
  out.assign(stage_cost_.size(), 0.0);
  edge_memory(idx, out);
  const RuntimeCalibration& cal = cost_.cluster().calibration;
  for (int b = 0; b < blocks_; ++b) {
    const int st = block_stage_[b], kind = b & 1, e = idx[b];
    const BlockSlot& full = block_cache_[2 * st + kind][e];
    double state = 0, act = 0, act_prev = 0;
    if (full.gen == gen_) {
      state = full.state, act = full.act, act_prev = full.act_prev;
    } else {
      MemorySlot& m = memory_cache_[2 * st + kind][e];
      if (m.gen != gen_) {
        const CostModel::BlockMemory c = stage_cost_[st].block_memory(
            kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[e]);
        m.state = c.state_bytes * cal.memory_state_scale;  // as fill_block has them
        m.act = c.activation_bytes * cal.memory_activation_scale;
        m.act_prev = c.activation_bytes_prev_recompute * cal.memory_activation_scale;
        m.gen = gen_;
      }
      state = m.state, act = m.act, act_prev = m.act_prev;
    }
    const bool after_recompute = kind && recomputes_[idx[b - 1]];
    out[st] += state + in_flight_[st] * (after_recompute ? act_prev : act);
  }
}

double SimRun::memory_of(const std::vector<int>& idx) const {
  stage_memory(idx, stage_scratch_);
  return *std::max_element(stage_scratch_.begin(), stage_scratch_.end());
}

void SimRun::sum_blocks(const std::vector<int>& idx, LogNormalNoise* noise, double m,
                        const StageSums& acc, Measurement& out, Energy& e) const {
  auto draw = [noise]() { return noise ? noise->next() : 1.0; };
  for (int b = 0; b < blocks_; ++b) {
    const int kind = b & 1, st = block_stage_[b];
    const BlockSlot& c = block(st, kind, idx[b]);
    const double nc = draw(), nm = draw();
    const double fwd = c.fwd * nc, bwd = c.bwd * nc, comm = c.comm * nm;
    out.block_fwd_s[b] = m * fwd;
    out.block_bwd_s[b] = m * bwd;
    out.block_comm_s[b] = m * comm + c.grad_sync * nm;
    acc.mb[st] += fwd + bwd + comm;
    acc.waits[st] += comm;
    acc.fwd1[st] += fwd;
    acc.bwd1[st] += bwd;
    acc.sync[st] += c.grad_sync * nm;
    acc.gather[st] += c.param_gather * nm;
    acc.opt[st] += c.optimizer;
    acc.params[st] += c.params;
    acc.host[st] += c.host;
    const bool after_recompute = kind && recomputes_[idx[b - 1]];
    stage_scratch_[st] += c.state + in_flight_[st] * (after_recompute ? c.act_prev : c.act);
    e.busy_j += m * c.busy_j * nc;
    e.link_j += m * c.link_j;
    // Embedding output takes block 0's layout for free (token ids are everywhere); later
    // boundaries inside a stage, and the data-parallel LM head, move activations if the
    // layouts differ. A stage boundary sends the activations point to point instead.
    const int prev = b > 0 ? idx[b - 1] : -1;
    if (prev >= 0 && block_stage_[b - 1] == st && act_id_[prev] != act_id_[idx[b]]) {
      const TransferSlot& r = redistribution(st, prev, idx[b]);
      acc.redist[st] += r.time, e.redist_j += m * r.energy;
    }
  }
  const int p = static_cast<int>(stage_cost_.size());
  if (act_id_[idx[blocks_ - 1]] != act_id_[dp_entry_]) {
    const TransferSlot& r = redistribution(p - 1, idx[blocks_ - 1], dp_entry_);
    acc.redist[p - 1] += r.time, e.redist_j += m * r.energy;
  }
}

double SimRun::latency_with_transfers(const StageSums& acc, int p, IterationBreakdown* bd,
                                      double& schedule_s) const {
  // Point-to-point activations and their gradients between stages: every rank of a stage
  // sends its part to the same position of the next stage at once; the slowest pair sets a
  // boundary's time. hop[p − 1]: the last stage to the first (interleaved chunks wrap).
  const ModelSpec& mm = stage_cost_[0].model();  // per micro-batch (and sequence part)
  const double bytes =
      double(mm.global_batch) / stage_world_ * mm.seq * model_.hidden * dtype_bytes(model_.dtype);
  const LinkState& ls = cost_.links();
  for (int b = 0; b < p; ++b) {
    const int from = b * stage_world_, to = ((b + 1) % p) * stage_world_;
    acc.hop[b] = 0;
    for (int k = 0; k < stage_world_; ++k) {
      const int l = ls.link_of(from + k, to + k);
      if (l < 0) continue;
      const double bw = ls.bw(from + k, to + k) * ls.classes[l].bus_efficiency;
      acc.hop[b] = std::max(acc.hop[b], ls.lat(from + k, to + k) + (bw > 0 ? bytes / bw : 0.0));
    }
  }
  for (int s = 0; s < p; ++s) {
    const double f = acc.fwd1[s], w = acc.bwd1[s];
    acc.fwd_share[s] = f + w > 0 ? f / (f + w) : 1.0 / 3;
  }
  // Live CPU ranks share the calibration machine's cores (RuntimeCalibration::host_cores);
  // a pass holds them except while its ranks wait in collectives (pipeline_replay).
  const int cores = cost_.cluster().calibration.host_cores;
  for (int s = 0; s < p; ++s) acc.waits[s] = acc.mb[s] > 0 ? acc.waits[s] / acc.mb[s] : 0.0;
  const double latency = pipeline_time_with_transfers(
      acc.mb, acc.fwd_share, acc.hop, p, pipe_.micro_batches, pipe_.schedule, pipe_.virtual_stages,
      model_.overlap_p2p_comm, stage_world_, cores, acc.waits);
  if (bd) {  // the same schedule without transfers, for the breakdown's p2p share
    std::vector<double> none(p, 0.0);
    schedule_s = pipeline_time_with_transfers(
        acc.mb, acc.fwd_share, none.data(), p, pipe_.micro_batches, pipe_.schedule,
        pipe_.virtual_stages, model_.overlap_p2p_comm, stage_world_, cores, acc.waits);
  }
  return latency;
}

double SimRun::iteration_tail(const std::vector<int>& idx, const StageSums& acc, int p, double nh,
                              IterationBreakdown* bd) const {
  const HeadCost& h = head();
  // Iteration tail: the data-parallel work of the slowest stage. Megatron-LM's buckets hold
  // max(40M, 1M·DP) parameters (distributed/distributed_data_parallel.py); state / bytes per
  // parameter gives the stage's parameter count.
  // The embedding and head gradients, reduced over the replicas of the vocabulary split.
  const int t_last = model_.vocab_parallel ? entries_[idx[blocks_ - 1]].degree() : 1;
  double tail = h.grad_sync_s * nh / t_last;
  // With stages, the first holds the word embedding and the last its tied copy for the LM
  // head; after the flush their gradients are all-reduced between each such pair of ranks
  // (Megatron-LM finalize_model_grads.py, _allreduce_word_embedding_grads): V·h/t values.
  double embedding_sync = 0;
  // (A head measured by calibration has its reductions in its row: grad_sync_s is 0 then.)
  if (p > 1 && h.grad_sync_s > 0) {
    const double bytes = double(model_.vocab) * model_.hidden / t_last * model_.grad_bytes();
    const std::vector<int> pair = {0, (p - 1) * stage_world_};
    embedding_sync =
        collective_time(CollOp::kAllReduce, bytes, describe_group(pair, cost_.links())) * nh;
    tail += embedding_sync;
  }
  double tail_max = 0;
  if (bd) bd->stages.assign(p, StageTimes{});
  for (int s = 0; s < p; ++s) {
    const int buckets = std::max(1, static_cast<int>(std::ceil(acc.params[s] / 4e7)));
    const double v = pipe_.schedule == Schedule::kInterleaved ? pipe_.virtual_stages : 1;
    const double g = model_.overlap_grad_reduce
                         ? overlapped_exposed(acc.sync[s], acc.bwd1[s] / v, buckets)
                         : acc.sync[s];
    const double a = model_.overlap_param_gather
                         ? overlapped_exposed(acc.gather[s], acc.fwd1[s] / v, buckets)
                         : acc.gather[s];
    tail_max = std::max(tail_max, g + a + acc.opt[s]);
    if (bd) {
      StageTimes& st = bd->stages[s];
      st.micro_batch_s = acc.mb[s];
      st.host_s = acc.host[s] + loop_host_s(h);
      st.grad_sync_s = acc.sync[s], st.param_gather_s = acc.gather[s], st.optimizer_s = acc.opt[s];
      st.tail_s = g + a + acc.opt[s];
    }
  }
  if (bd) bd->head_sync_s = tail, bd->embedding_sync_s = embedding_sync;
  return tail + tail_max + h.iteration_s;
}

// Peak memory per rank: its stage's (an excluded share group holds no state); out of memory
// where a stage exceeds its capacity.
void SimRun::fill_memory(Measurement& out) const {
  const int p = static_cast<int>(stage_cost_.size());
  const std::vector<int>& now = pipe_.shares;
  if (p == 1) {
    out.peak_memory_bytes.assign(world_, stage_scratch_[0]);
  } else {
    out.peak_memory_bytes.resize(world_);
    for (int r = 0; r < world_; ++r) out.peak_memory_bytes[r] = stage_scratch_[r / stage_world_];
  }
  if (!now.empty()) {
    const int n = static_cast<int>(now.size()), g = stage_world_ / n;
    for (int r = 0; r < world_; ++r)
      if (now[std::min(n - 1, (r % stage_world_) / g)] == 0) out.peak_memory_bytes[r] = 0;
  }
  out.oom = false;
  for (int s = 0; s < p; ++s) out.oom = out.oom || stage_scratch_[s] > stage_capacity_[s];
}

void SimRun::evaluate(const std::vector<int>& idx, const std::vector<int>* from,
                      const std::vector<int>& from_stage, int from_stage_world,
                      LogNormalNoise* noise, Measurement& out, IterationBreakdown* bd) const {
  auto draw = [noise]() { return noise ? noise->next() : 1.0; };
  const HeadCost& h = head();
  const int p = static_cast<int>(stage_cost_.size());
  const double m = std::max(1, pipe_.micro_batches);
  out.block_fwd_s.resize(blocks_);
  out.block_bwd_s.resize(blocks_);
  out.block_comm_s.resize(blocks_);
  // Per stage (StageSums): one micro-batch's time, the last micro-batch's backward and first
  // forward (the overlap windows), gradient / parameter / optimizer work of the iteration.
  // Peak memory per stage (stage_memory's sum, fused into the block loop).
  // host: the time the stage's host needs to issue one micro-batch (docs/design.md §4).
  // hop, fwd_share: the point-to-point transfer over each stage boundary, the forward's share
  // of each stage's micro-batch (pipeline_time_with_transfers); waits: the part of it spent
  // in collectives (the blocks' exposed exchanges and the redistributions).
  stage_acc_.assign(12 * size_t(p), 0.0);
  double* base = stage_acc_.data();
  const StageSums acc{base,         base + p,     base + 2 * p,  base + 3 * p,
                      base + 4 * p, base + 5 * p, base + 6 * p,  base + 7 * p,
                      base + 8 * p, base + 9 * p, base + 10 * p, base + 11 * p};
  stage_scratch_.assign(p, 0.0);
  edge_memory(idx, stage_scratch_);
  Energy e;
  e.link_j = h.link_energy_j * m;
  sum_blocks(idx, noise, m, acc, out, e);
  if (model_.live_layers) live_stage_memory(idx, stage_scratch_);
  const double nr = draw(), nh = draw(), np = draw();
  for (int s = 0; s < p; ++s) acc.mb[s] += acc.redist[s] * nr, acc.waits[s] += acc.redist[s] * nr;
  acc.mb[p - 1] += h.compute_s * nh;
  // A micro-batch on a stage takes at least what its host needs to issue it (the GPU waits
  // for kernels the host has not launched yet): the blocks' kernels, the embedding and head on
  // the last stage, and the framework's own work per micro-batch; how much of the issue the
  // GPU's work hides is the hosts' overlap exponent (CostModel::with_host).
  acc.host[p - 1] += h.host_s;
  const double loop = loop_host_s(h);
  for (int s = 0; s < p; ++s) acc.mb[s] = cost_.with_host(acc.mb[s], acc.host[s] + loop);
  e.busy_j += m * h.busy_energy_j * nh;
  double schedule_s =
      pipeline_time(acc.mb, p, pipe_.micro_batches, pipe_.schedule, pipe_.virtual_stages);
  double latency = p > 1 ? latency_with_transfers(acc, p, bd, schedule_s) : schedule_s;
  const double p2p_s = latency - schedule_s;
  latency += iteration_tail(idx, acc, p, nh, bd);
  if (bd) {
    bd->schedule_s = schedule_s, bd->p2p_s = p2p_s;
    bd->head_s = h.compute_s;
    bd->step_latency_s = latency;
  }

  const RepartitionSums rep = price_repartition(idx, from, from_stage, from_stage_world);
  out.step_latency_s = latency;
  out.repartition_s = rep.seconds * np;
  out.repartition_bytes = rep.bytes;
  out.repartition_peak_bytes = rep.peak_bytes;
  out.energy_j = idle_power_w_ * (latency + out.repartition_s) + e.busy_j + e.link_j + e.redist_j +
                 rep.energy_j;
  out.tokens = double(effective_global_batch(cost_.model(), world_)) * cost_.model().seq;
  fill_memory(out);
  out.ok = true;
  out.latency_source = out.memory_source = out.energy_source = "model";
}

}  // namespace shardgym
