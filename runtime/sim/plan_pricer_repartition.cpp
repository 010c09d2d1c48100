// PlanPricer::price_repartition: what moving from one plan to the next costs, block by block
// (docs/design.md §4, "Repartition"; §11 for share groups that leave and rejoin): seconds,
// bytes received (all ranks), link energy and the memory a rank holds in transit on top of
// its state (runtime/sim/layout.h). Split from evaluate() (plan_pricer_evaluate.cpp), which prices
// the iteration.
#include <algorithm>
#include <numeric>
#include <vector>

#include "runtime/core/placement.h"
#include "runtime/sim/layout.h"
#include "runtime/sim/plan_pricer.h"

namespace shardgym {

// Its stage's ranks changed (a boundary move, or a new stage count): every rank of the new
// stage receives what it lacks of its new boxes from the old stage's ranks (layout.h,
// stage_move_cost: the live exchange's geometry). The old stage's first rank counts in the old
// pipeline's stage size: with another stage count, the new size put it past the world (ASan:
// heap-buffer-overflow in LinkState::link_of).
void PlanPricer::price_stage_move(int b, int a, int z, int from_st, int from_stage_world,
                                  double both, TransitSums& t) {
  const LinkState& ls = cost_.links();
  const int st = block_stage_[b];
  const int src = from_st * from_stage_world, dst = st * stage_world_;
  const StageMove& mv = stage_move(b & 1, a, src, from_stage_world, z, dst);
  const int l = ls.link_of(src, dst);
  const double bw = ls.bw(src, dst) * (l >= 0 ? ls.classes[l].bus_efficiency : 1.0);
  t.seconds += ls.lat(src, dst) + (bw > 0 ? mv.max_rank_bytes / bw : 0.0);
  t.bytes += mv.bytes * both;
  t.energy_j += mv.bytes * both * (l >= 0 ? ls.classes[l].energy_per_byte : 0.0);
  ++t.moved_blocks, t.messages += mv.messages;
  // Per rank of the world: its new state (none where it keeps every box) and its largest
  // message, then its old state (unless kept) and its gradients are freed.
  std::vector<double>& held_r = transit_held_;
  if (!t.per_rank) held_r.assign(world_, t.held), t.per_rank = true;
  const double moved = stage_cost_[st].moved_bytes_per_param();
  for (int q = 0; q < world_ && q < static_cast<int>(mv.ranks.size()); ++q) {
    const RankMove& r = mv.ranks[q];
    const double f = r.keeps ? 0.0 : moved * r.new_elements;
    t.peak = std::max(t.peak, held_r[q] + f + r.message_bytes);
    held_r[q] +=
        f - (r.keeps ? 0.0 : moved * r.old_elements) - model_.grad_bytes() * r.old_elements;
  }
}

// A block that stays on its stage's ranks and changes its parameters' layout (a → z).
void PlanPricer::price_block_move(int b, int a, int z, double both, TransitSums& t) {
  const int st = block_stage_[b];
  const TransferSlot& r = repartition(st, b & 1, a, z);
  t.seconds += r.time, t.bytes += r.bytes * both, t.energy_j += r.energy * both;
  ++t.moved_blocks, t.messages += r.messages;
  const double moved = stage_cost_[st].moved_bytes_per_param();
  const double fresh = moved * block(st, b & 1, z).params;
  // The old strategy may not fit this stage when the pipeline changed shape with it.
  const int ta = entries_[a].degree();
  const double old_params =
      ta > 0 && stage_world_ % ta == 0
          ? block(st, b & 1, a).params
          : rank_param_elements(model_, b & 1 ? BlockKind::kMlp : BlockKind::kAttention,
                                entries_[a]);
  std::vector<double>& held_r = transit_held_;
  if (r.ranks && !t.per_rank) held_r.assign(world_, t.held), t.per_rank = true;
  if (!t.per_rank) {
    t.peak = std::max(t.peak, t.held + fresh + r.message);
    t.held += fresh - (moved + model_.grad_bytes()) * old_params;
    return;
  }
  // Each rank: its new state (none where it keeps every box) and its largest message, then
  // its old state (unless kept) and its gradients are freed.
  double* h = held_r.data() + st * stage_world_;
  const bool each = r.ranks && static_cast<int>(r.ranks->size()) == stage_world_;
  for (int q = 0; q < stage_world_; ++q) {
    if (each) {
      const RankMove& mv = (*r.ranks)[q];
      const double f = mv.keeps ? 0.0 : moved * mv.new_elements;
      t.peak = std::max(t.peak, h[q] + f + mv.message_bytes);
      h[q] +=
          f - (mv.keeps ? 0.0 : moved * mv.old_elements) - model_.grad_bytes() * mv.old_elements;
    } else {
      t.peak = std::max(t.peak, h[q] + fresh + r.message);
      h[q] += fresh - (moved + model_.grad_bytes()) * old_params;
    }
  }
}

PlanPricer::RepartitionSums PlanPricer::price_repartition(const std::vector<int>& idx,
                                                          const std::vector<int>* from,
                                                          const std::vector<int>& from_stage,
                                                          int from_stage_world,
                                                          const std::vector<int>& from_shares) {
  // Memory in transit (layout.h): blocks move in order, each holding its new state and one
  // message before its old state (with its gradients) is freed; `held` is what the blocks
  // moved so far added. Raw state bytes, as the live tensors are (no memory calibration).
  // Per rank (transit_held_, world_ entries) from the first block whose move involves an
  // uneven layout on: before it every rank had added the same (layout.h).
  TransitSums t;
  // With stages a rank moves its own stage's blocks only: kept per rank from the start.
  if (from && stage_world_ < world_) transit_held_.assign(world_, 0.0), t.per_rank = true;
  // Share groups (data_shares.h) active before and now: only ranks of groups that train in
  // both plans receive what their new boxes lack; a group that leaves receives nothing and a
  // group that joins receives all of its new state (below). Every group holds the same boxes
  // (degrees divide a group), so a group's part of a block's bytes is 1/n of them.
  const std::vector<int>& before = from_shares;
  const std::vector<int>& now = pipe_.shares;
  const int groups = static_cast<int>(std::max(before.size(), now.size()));
  auto had = [&](int i) { return before.empty() || before[i] > 0; };
  auto has = [&](int i) { return now.empty() || now[i] > 0; };
  const bool comparable =
      groups > 0 && (before.empty() || now.empty() || before.size() == now.size());
  double both = 1.0;  // the fraction of every stage's ranks that train before and now
  if (comparable) {
    int n_both = 0;
    for (int i = 0; i < groups; ++i) n_both += had(i) && has(i) ? 1 : 0;
    both = double(n_both) / groups;
  }
  // Nothing moves when every block keeps its strategy and stage.
  if (from && !(*from == idx && &from_stage == &block_stage_)) {
    for (int b = 0; b < blocks_; ++b) {
      const int a = (*from)[b], z = idx[b], st = block_stage_[b];
      const bool staged = b < static_cast<int>(from_stage.size());
      if (a != z || (staged && from_stage[b] != st)) ++t.changed;
      if (staged && (from_stage[b] != st || from_stage_world != stage_world_))
        price_stage_move(b, a, z, from_stage[b], from_stage_world, both, t);
      else if (a != z && param_id_[a] != param_id_[z])
        price_block_move(b, a, z, both, t);
    }
  }
  // Share groups that leave a weight of 0 receive every block's state (parameters and
  // optimizer state, as their strategies shard them) and their part of the embedding and LM
  // head (edge_memory's split) from a group that held it (one that leaves hands over before it
  // drops its state: runtime/live/tp/repartition.cpp), over the link between the two groups'
  // first ranks, all receiving ranks in parallel.
  if (from && comparable && before != now) {
    const int g = stage_world_ / groups;
    int donor = -1;
    for (int i = 0; i < groups && donor < 0; ++i) donor = had(i) ? i : -1;
    for (int i = 0; i < groups && donor >= 0; ++i) {
      if (had(i) || !has(i)) continue;
      const RepartitionSums j = price_group_join(idx, donor, i, g);
      t.seconds += j.seconds, t.bytes += j.bytes, t.energy_j += j.energy_j;
      t.peak = std::max(t.peak, j.peak_bytes);
      ++t.changed;
    }
  }
  // A new stage count changes the first and the last stage's ranks: the embedding, the final
  // norm and the LM head move to the ranks that join them (runtime/live/tp/repartition.cpp,
  // move_outer), all in one exchange.
  if (from && from_stage_world > 0 && from_stage_world != stage_world_) {
    const OuterMove o = price_outer_move(from_stage_world);
    if (o.bytes > 0) {
      t.seconds += o.seconds, t.bytes += o.bytes * both, t.energy_j += o.energy_j * both;
      // A rank that joins holds the new tensors and the message that brings them.
      for (int q = 0; q < world_; ++q)
        t.peak = std::max(t.peak, (t.per_rank ? transit_held_[q] : t.held) + 2 * o.received[q]);
      ++t.changed, ++t.moved_blocks, t.messages += 1;
    }
  }
  const RuntimeCalibration& cal = cost_.cluster().calibration;
  // Measured: a block whose strategy changes but whose parameters stay (only sp, chunks or
  // recompute differ) keeps its tensors, and costs nothing but the fixed part.
  if (cal.repartition_bandwidth > 0 && t.changed > 0)
    t.seconds = cal.repartition_fixed_s + cal.repartition_per_block_s * t.moved_blocks +
                cal.repartition_per_message_s * t.messages + t.bytes / cal.repartition_bandwidth;
  RepartitionSums out;
  out.seconds = t.seconds, out.bytes = t.bytes, out.energy_j = t.energy_j, out.peak_bytes = t.peak;
  out.changed = t.changed > 0, out.moved_blocks = t.moved_blocks, out.messages = t.messages;
  return out;
}

// Share group `joiner` (weight 0 before, > 0 now) receives its state from group `donor`: see
// price_repartition. g: ranks per group and stage.
PlanPricer::RepartitionSums PlanPricer::price_group_join(const std::vector<int>& idx, int donor,
                                                         int joiner, int g) {
  const int t_first = model_.vocab_parallel ? entries_[idx[0]].degree() : 1;
  const int t_last = model_.vocab_parallel ? entries_[idx[blocks_ - 1]].degree() : 1;
  const double edge = double(model_.embedding_params());
  const double emb = double(model_.vocab) * model_.hidden + double(model_.seq) * model_.hidden;
  // per_rank: one rank of the group on the stage that receives most; peak: what it holds in
  // transit, received in the live order (its blocks, then the embedding and head), each item's
  // new state plus its one message (the whole item, from one holder). Uneven layouts give
  // ranks of a group different amounts by their position in each block's tensor group; the
  // positions repeat with the lcm of those degrees (it divides g).
  int period = 1;
  for (int b = 0; b < blocks_; ++b)
    if (entries_[idx[b]].uneven()) period = std::lcm(period, entries_[idx[b]].degree());
  double per_rank = 0, bytes = 0, peak = 0;
  for (int st = 0; st < stages_; ++st) {
    const double moved = stage_cost_[st].moved_bytes_per_param();
    for (int q = 0; q < period; ++q) {
      double stage_rank = 0;
      auto receive = [&](double item) {
        peak = std::max(peak, stage_rank + 2 * item);
        stage_rank += item;
      };
      for (int b = 0; b < blocks_; ++b) {
        if (block_stage_[b] != st) continue;
        const Strategy& s = entries_[idx[b]];
        const BlockKind kind = b & 1 ? BlockKind::kMlp : BlockKind::kAttention;
        receive(moved * (s.uneven() ? rank_param_elements(model_, kind, s, q % s.degree())
                                    : block(st, b & 1, idx[b]).params));
      }
      const double edge_here =
          (st == 0 ? emb / t_first : 0.0) + (st + 1 == stages_ ? (edge - emb) / t_last : 0.0);
      if (edge_here > 0) receive(moved * edge_here);
      per_rank = std::max(per_rank, stage_rank);
      bytes += stage_rank * g / period;
    }
  }
  const LinkState& ls = cost_.links();
  const int src = donor * g, dst = joiner * g;
  const int l = ls.link_of(src, dst);
  const double bw = ls.bw(src, dst) * (l >= 0 ? ls.classes[l].bus_efficiency : 1.0);
  RepartitionSums out;
  out.seconds = ls.lat(src, dst) + (bw > 0 ? per_rank / bw : 0.0);
  out.bytes = bytes;
  out.energy_j = bytes * (l >= 0 ? ls.classes[l].energy_per_byte : 0.0);
  out.peak_bytes = peak;
  return out;
}

const PlanPricer::StageMove& PlanPricer::stage_move(int kind, int from, int from_first,
                                                    int from_size, int to, int to_first) {
  const std::array<int, 7> key{kind, from, from_first, from_size, to, to_first, stage_world_};
  if (auto it = stage_moves_.find(key); it != stage_moves_.end()) return it->second;
  const double moved = stage_cost_[0].moved_bytes_per_param();
  const TransferCost c = stage_move_cost(
      model_, kind ? BlockKind::kMlp : BlockKind::kAttention, entries_[from], from_first, from_size,
      entries_[to], to_first, stage_world_, moved, cost_.cluster(), cost_.links());
  StageMove mv;
  mv.bytes = c.bytes, mv.max_rank_bytes = c.max_rank_bytes;
  mv.messages = c.max_rank_messages;
  mv.ranks = c.rank_moves;
  return stage_moves_.emplace(key, std::move(mv)).first->second;
}

PlanPricer::OuterMove PlanPricer::price_outer_move(int from_stage_world) {
  // Who holds each outer tensor (live: outer_holders): the embedding the first stage, the
  // final norm and the LM head the last; a tied wte both.
  const int64_t h = model_.hidden, V = model_.vocab;
  struct Part {
    int64_t elements;
    bool first, last;
  };
  std::vector<Part> parts = {{V * h, true, model_.tied_embeddings},
                             {model_.norm_params_per_hidden() * h, false, true}};
  if (!model_.rotary) parts.push_back({model_.full_seq() * h, true, false});
  if (!model_.tied_embeddings) parts.push_back({V * h, false, true});
  auto holds = [&](const Part& p, int q, int size) {
    return (p.first && q < size) || (p.last && q >= world_ - size);
  };
  const double moved = stage_cost_[0].moved_bytes_per_param();
  const LinkState& ls = cost_.links();
  OuterMove out;
  out.received.assign(world_, 0.0);
  for (int q = 0; q < world_; ++q) {
    double elements = 0;
    bool from_first = false;
    for (const Part& p : parts)
      if (holds(p, q, stage_world_) && !holds(p, q, from_stage_world)) {
        elements += double(p.elements);
        from_first = from_first || p.first;
      }
    if (elements == 0) continue;
    const double bytes = elements * moved;
    const int src = from_first ? 0 : world_ - 1;
    const int l = ls.link_of(src, q);
    const double bw = ls.bw(src, q) * (l >= 0 ? ls.classes[l].bus_efficiency : 1.0);
    out.seconds = std::max(out.seconds, ls.lat(src, q) + (bw > 0 ? bytes / bw : 0.0));
    out.bytes += bytes;
    out.energy_j += bytes * (l >= 0 ? ls.classes[l].energy_per_byte : 0.0);
    out.received[q] = bytes;
  }
  return out;
}

}  // namespace shardgym
