// SimRun's caches and the evaluation of one plan (the hot path of step()).
#include <algorithm>

#include "runtime/core/cost.h"
#include "runtime/sim/layout.h"
#include "runtime/sim/sim_run.h"

namespace shardgym {
namespace {

constexpr uint64_t kUnpackable = ~uint64_t(0);

// Exact packing of the fields that Strategy::operator== compares (kUnpackable when a field
// is too large for its bits: such strategies are looked up by comparison).
uint64_t strategy_key(const Strategy& s) {
  uint64_t a = 0, b = 0, sp = 0, row = 0;
  if (s.kind == StrategyKind::kTP1D) a = uint64_t(s.t), sp = s.sp ? 1 : 0;
  if (s.kind == StrategyKind::kTP2D) a = uint64_t(s.d1), b = uint64_t(s.d2), row = s.row_first;
  const uint64_t chunks = uint64_t(s.chunks);
  if (a >= (1u << 20) || b >= (1u << 20) || chunks >= (1u << 19)) return kUnpackable;
  return uint64_t(s.kind) | a << 2 | b << 22 | sp << 42 | row << 43 | chunks << 44 |
         uint64_t(s.recompute ? 1 : 0) << 63;
}

size_t hash_slot(uint64_t key, size_t mask) {
  return size_t((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

// Dense id of `key` in `keys`, appended if new.
int dense_id(std::vector<uint32_t>& keys, uint32_t key) {
  auto it = std::find(keys.begin(), keys.end(), key);
  if (it != keys.end()) return static_cast<int>(it - keys.begin());
  keys.push_back(key);
  return static_cast<int>(keys.size()) - 1;
}

}  // namespace

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
  act_id_.push_back(dense_id(act_keys_, activation_layout_key(s)));
  param_id_.push_back(dense_id(param_keys_, param_layout_key(s)));
  for (auto& c : block_cache_) c.resize(entries_.size());
  for (auto& m : shape_ok_) m.resize(entries_.size());
  shape_gen_ = 0;
  if (static_cast<int>(act_keys_.size()) > act_stride_) {
    act_stride_ = std::max<int>(2 * act_stride_, act_keys_.size());
    redist_cache_.assign(size_t(act_stride_) * act_stride_, TransferSlot{});
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

void SimRun::ensure_shapes() const {
  if (shape_gen_ == gen_) return;
  for (int kind = 0; kind < 2; ++kind) {
    const BlockKind bk = kind == 0 ? BlockKind::kAttention : BlockKind::kMlp;
    for (size_t e = 0; e < entries_.size(); ++e)
      shape_ok_[kind][e] =
          strategy_invalid_reason(entries_[e], cost_.model(), bk, world_).empty() ? 1 : 0;
  }
  shape_gen_ = gen_;
}

std::string SimRun::resolve(const Plan& plan, std::vector<int>& idx) const {
  if (plan.size() != blocks_)
    return "plan has " + std::to_string(plan.size()) + " blocks, the model has " +
           std::to_string(blocks_);
  idx.resize(blocks_);
  for (int b = 0; b < blocks_; ++b) {
    // Unchanged blocks skip the hash lookup.
    const uint64_t key = strategy_key(plan.blocks[b]);
    const bool same = b < static_cast<int>(idx_.size()) && key != kUnpackable &&
                      key == entry_keys_[idx_[b]];
    idx[b] = same ? idx_[b] : entry_of(plan.blocks[b], key);
  }
  ensure_shapes();
  for (int b = 0; b < blocks_; ++b) {
    if (shape_ok_[b & 1][idx[b]]) continue;
    const BlockKind kind = ModelSpec::block_kind(b);
    return "block " + std::to_string(b) + " (" + block_kind_name(kind) + "): " +
           entries_[idx[b]].to_string() + " is not valid: " +
           strategy_invalid_reason(entries_[idx[b]], cost_.model(), kind, world_);
  }
  return "";
}

const HeadCost& SimRun::head() const {
  if (head_gen_ != gen_) head_ = cost_.head_cost(), head_gen_ = gen_;
  return head_;
}

const SimRun::BlockSlot& SimRun::block(int kind, int entry) const {
  BlockSlot& s = block_cache_[kind][entry];
  if (s.gen == gen_) return s;
  const BlockCost c =
      cost_.block_cost(kind == 0 ? BlockKind::kAttention : BlockKind::kMlp, entries_[entry]);
  s.fwd = c.fwd_s, s.bwd = c.bwd_s, s.comm = c.comm_s;
  s.busy_j = c.busy_energy_j, s.link_j = c.link_energy_j;
  s.state = c.state_bytes, s.act = c.activation_bytes;
  s.act_prev = c.activation_bytes_prev_recompute;
  s.gen = gen_;
  return s;
}

const SimRun::TransferSlot& SimRun::redistribution(int from, int to) const {
  TransferSlot& s = redist_cache_[size_t(act_id_[from]) * act_stride_ + act_id_[to]];
  if (s.gen == gen_) return s;
  const TransferCost c = cost_.redistribution(entries_[from], entries_[to]);
  s.time = c.time_s, s.bytes = c.bytes, s.energy = c.energy_j, s.gen = gen_;
  return s;
}

const SimRun::TransferSlot& SimRun::repartition(int kind, int from, int to) const {
  TransferSlot& s = repart_cache_[kind][size_t(param_id_[from]) * param_stride_ + param_id_[to]];
  if (s.gen == gen_) return s;
  const TransferCost c = cost_.repartition(kind == 0 ? BlockKind::kAttention : BlockKind::kMlp,
                                           entries_[from], entries_[to]);
  s.time = c.time_s, s.bytes = c.bytes, s.energy = c.energy_j, s.gen = gen_;
  return s;
}

double SimRun::memory_of(const std::vector<int>& idx) const {
  double mem = head().memory_bytes;
  for (int b = 0; b < blocks_; ++b) {
    const BlockSlot& c = block(b & 1, idx[b]);
    const bool after_recompute = (b & 1) && entries_[idx[b - 1]].recompute;
    mem += c.state + (after_recompute ? c.act_prev : c.act);
  }
  return mem;
}

void SimRun::evaluate(const std::vector<int>& idx, const std::vector<int>* from,
                      LogNormalNoise* noise, Measurement& out) const {
  auto draw = [noise]() { return noise ? noise->next() : 1.0; };
  const HeadCost& h = head();
  out.block_fwd_s.resize(blocks_);
  out.block_bwd_s.resize(blocks_);
  out.block_comm_s.resize(blocks_);
  double latency = 0, busy_j = 0, link_j = h.link_energy_j, mem = h.memory_bytes;
  double redist_s = 0, redist_j = 0;
  for (int b = 0; b < blocks_; ++b) {
    const int kind = b & 1;
    const BlockSlot& c = block(kind, idx[b]);
    const double nc = draw(), nm = draw();
    const double fwd = c.fwd * nc, bwd = c.bwd * nc, comm = c.comm * nm;
    out.block_fwd_s[b] = fwd;
    out.block_bwd_s[b] = bwd;
    out.block_comm_s[b] = comm;
    latency += fwd + bwd + comm;
    busy_j += c.busy_j * nc;
    link_j += c.link_j;
    const bool after_recompute = kind == 1 && entries_[idx[b - 1]].recompute;
    mem += c.state + (after_recompute ? c.act_prev : c.act);
    // Embedding output takes block 0's layout for free (token ids are everywhere); later
    // boundaries, and the data-parallel LM head, move activations if the layouts differ.
    const int prev = b > 0 ? idx[b - 1] : -1;
    if (prev >= 0 && act_id_[prev] != act_id_[idx[b]]) {
      const TransferSlot& r = redistribution(prev, idx[b]);
      redist_s += r.time, redist_j += r.energy;
    }
  }
  if (act_id_[idx[blocks_ - 1]] != act_id_[dp_entry_]) {
    const TransferSlot& r = redistribution(idx[blocks_ - 1], dp_entry_);
    redist_s += r.time, redist_j += r.energy;
  }
  const double nr = draw(), nh = draw(), np = draw();
  latency += redist_s * nr + (h.compute_s + h.grad_sync_s) * nh;
  busy_j += h.busy_energy_j * nh;

  double rep_s = 0, rep_bytes = 0, rep_j = 0;
  if (from) {
    for (int b = 0; b < blocks_; ++b) {
      const int a = (*from)[b], z = idx[b];
      if (a == z || param_id_[a] == param_id_[z]) continue;
      const TransferSlot& r = repartition(b & 1, a, z);
      rep_s += r.time, rep_bytes += r.bytes, rep_j += r.energy;
    }
  }
  out.step_latency_s = latency;
  out.repartition_s = rep_s * np;
  out.repartition_bytes = rep_bytes;
  out.energy_j = h.idle_power_w * (latency + out.repartition_s) + busy_j + link_j + redist_j + rep_j;
  out.tokens = double(effective_global_batch(cost_.model(), world_)) * cost_.model().seq;
  out.peak_memory_bytes.assign(world_, mem);
  // Every rank holds the same bytes; the smallest device decides.
  out.oom = mem > h.memory_capacity;
  out.ok = true;
  out.latency_source = out.memory_source = out.energy_source = "model";
}

}  // namespace shardgym
