// PlanPricer::action_mask: shape validity and memory fit with one block changed, in O(catalog)
// byte operations per block (the env asks for a row per changed block on every step).
//
// With the other blocks fixed, entry e fits block b iff  base + part(e) ≤ capacity, where
// base is the plan's memory without block b's share. part(e) is the entry's own state and
// activations, plus for an attention block its MLP's activations, which depend only on
// whether e recomputes. So within each group of entries the admitted ones are a prefix of
// the group sorted by its own term: the row is one precomputed prefix (MLP) or the union of
// two (attention: recomputing and non-recomputing entries).
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "runtime/sim/plan_pricer.h"

namespace shardgym {

void PlanPricer::ensure_mask_tables() {
  if (mask_gen_ == gen_ && mask_tables_) return;
  mask_tables_ = rows_->masks.load(std::memory_order_acquire);
  mask_gen_ = gen_;
  if (mask_tables_) return;  // another run of the share built them
  ensure_shapes();
  const int K = catalog_.size();
  MaskTables tables;
  for (int t = 0; t < 4; ++t) {
    const int kind = t < 2 ? 0 : 1;
    std::vector<std::pair<double, int>> members;
    for (int e = 0; e < K; ++e) {
      if (!shape_ok_[kind][e]) continue;
      if (kind == 0 && entries_[e].recompute != (t == 1)) continue;
      const BlockSlot& c = block(kind, e);
      members.emplace_back(c.state + (t == 3 ? c.act_prev : c.act), e);
    }
    std::sort(members.begin(), members.end());
    MaskTable& table = tables[t];
    table.values.resize(members.size());
    table.prefix.assign((members.size() + 1) * size_t(K), 0);
    for (size_t n = 0; n < members.size(); ++n) {
      table.values[n] = members[n].first;
      uint8_t* row = &table.prefix[(n + 1) * K];
      std::copy_n(row - K, K, row);
      row[members[n].second] = 1;
    }
  }
  std::lock_guard<std::mutex> lock(rows_->mutex);
  if (!rows_->masks_held) {  // else another run built the same tables meanwhile
    rows_->masks_held = std::make_unique<const MaskTables>(std::move(tables));
    rows_->masks.store(rows_->masks_held.get(), std::memory_order_release);
  }
  mask_tables_ = rows_->masks_held.get();
}

void PlanPricer::mask_rows(const std::vector<int>& in_force, int first, int count, uint8_t* out) {
  if (count <= 0) return;
  if (first < 0 || first + count > blocks_) {
    const int b = first < 0 ? first : first + count - 1;
    throw std::out_of_range("action_mask: block " + std::to_string(b) + " outside [0, " +
                            std::to_string(blocks_) + ")");
  }
  const int K = catalog_.size();
  if (stages_ > 1 || model_.live_layers) {
    // Pipelines and the live layers: try each entry on the whole plan (stage memory is not one
    // sum).
    ensure_shapes();
    std::vector<int> trial = in_force;
    for (int b = first; b < first + count; ++b, out += K) {
      for (int e = 0; e < K; ++e) {
        out[e] = 0;
        if (!shape_ok_[b & 1][e]) continue;
        trial[b] = e;
        stage_memory(trial, stage_scratch_);
        bool fits = true;
        for (size_t s = 0; s < stage_scratch_.size(); ++s)
          fits = fits && stage_scratch_[s] <= stage_capacity_[s];
        out[e] = fits ? 1 : 0;
      }
      trial[b] = in_force[b];
    }
    return;
  }
  ensure_mask_tables();
  if (current_mem_ < 0) current_mem_ = memory_of(in_force);
  const double cap = stage_capacity_[0];
  const MaskTables& tables = *mask_tables_;
  // Number of entries of table t whose own term is ≤ limit: std::upper_bound without its
  // branches (the limits of a plan's blocks are unrelated, so they mispredict half the time).
  // `hint` (the block's count at its last row) is taken when the limit still falls in its
  // interval, which is exact: then as many values are ≤ limit. Between steps the plan's memory
  // moves by the few blocks that changed, so most limits stay in their interval.
  if (row_hint_.size() != 2 * size_t(blocks_)) row_hint_.assign(2 * size_t(blocks_), 0);
  auto admitted = [&](int t, double limit, uint32_t& hint) -> size_t {
    const auto& v = tables[t].values;
    size_t n = v.size();
    if (hint <= n && (hint == 0 || !(limit < v[hint - 1])) && (hint == n || limit < v[hint]))
      return hint;
    if (n == 0) return hint = 0;
    const double* base = v.data();
    while (n > 1) {
      const size_t half = n / 2;
      base = !(limit < base[half]) ? base + half : base;
      n -= half;
    }
    hint = static_cast<uint32_t>(base - v.data()) + (!(limit < *base) ? 1 : 0);
    return hint;
  };
  for (int b = first; b < first + count; ++b, out += K) {
    const int kind = b & 1;
    const int neighbour = kind ? in_force[b - 1] : (b + 1 < blocks_ ? in_force[b + 1] : -1);
    MaskMemo& memo = mask_memo_[kind];
    const bool hit = memo.gen == gen_ && memo.memory == current_mem_ && memo.entry == in_force[b] &&
                     memo.neighbour == neighbour;
    const BlockSlot& cur = block(kind, in_force[b]);
    if (kind) {
      const bool after_recompute = recomputes_[in_force[b - 1]];
      const int t = after_recompute ? 3 : 2;
      if (!hit) {
        const double own = cur.state + (after_recompute ? cur.act_prev : cur.act);
        memo.first = admitted(t, cap - (current_mem_ - own), row_hint_[2 * b]);
      }
      std::memcpy(out, &tables[t].prefix[memo.first * K], K);
    } else {
      if (!hit) {
        double mlp_act = 0, mlp_act_prev = 0;
        if (neighbour >= 0) {
          const BlockSlot& mlp = block(1, neighbour);
          mlp_act = mlp.act, mlp_act_prev = mlp.act_prev;
        }
        const bool recomputes = recomputes_[in_force[b]];
        const double own = cur.state + cur.act + (recomputes ? mlp_act_prev : mlp_act);
        const double base = current_mem_ - own;
        memo.first = admitted(0, cap - base - mlp_act, row_hint_[2 * b]);
        memo.second = admitted(1, cap - base - mlp_act_prev, row_hint_[2 * b + 1]);
      }
      const uint8_t* plain = &tables[0].prefix[memo.first * K];
      const uint8_t* recompute = &tables[1].prefix[memo.second * K];
      int e = 0;
      for (; e + 8 <= K; e += 8) {  // eight entries at a time
        uint64_t a, r;
        std::memcpy(&a, plain + e, 8);
        std::memcpy(&r, recompute + e, 8);
        a |= r;
        std::memcpy(out + e, &a, 8);
      }
      for (; e < K; ++e) out[e] = plain[e] | recompute[e];
    }
    memo.gen = gen_, memo.memory = current_mem_, memo.entry = in_force[b],
    memo.neighbour = neighbour;
  }
}

}  // namespace shardgym
