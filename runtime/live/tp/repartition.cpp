// RankTrainer::repartition: moving blocks to new strategies between two iterations.
//
// Block by block, in order: each parameter of a block whose strategy changes goes, with its
// AdamW moments (exp_avg, exp_avg_sq), from the old boxes to the new ones through one
// ExchangePlan per block: a rank copies what it already holds and receives only the cells it
// lacks, each from the nearest holder (exchange.h). The block's old tensors (values, moments
// and the last step's gradients) are released as soon as its new ones are filled, so the
// memory a rank holds on top of its state during a repartition is at most one block's new
// state plus one message in transit, not the new state of every changed block. The simulator
// predicts that peak from the same geometry (runtime/sim/layout.h, repartition_peak_bytes).
// The AdamW step counter is a per-parameter scalar that every rank already holds (every rank
// holds a piece of every parameter and all pieces step together; an excluded rank counts the
// steps it sits out), so it moves without traffic. Gradients are not moved: they are
// recomputed by the next step. Blocks whose placement is unchanged (only chunks, recompute or
// sp differ) keep their tensors.
//
// Excluded ranks (a share group of weight 0, docs/design.md §11) hold empty boxes. When the
// active ranks change, every block and the outer parameters move as above: a rank that leaves
// keeps nothing (survivors that lack a cell receive it from it first), and a rank that joins
// receives its boxes, with their moments, from the nearest holder.
#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_state.h"

namespace shardgym::live {
namespace {

// Moves parameters `old` (values and AdamW moments) into `next` (the same parameters in the
// same order, their new boxes) through one exchange; have[i][q] and want[i][q] are rank q's boxes
// of parameter i before and after. Every rank lists the same items. Returns the elements this
// rank received. The inputs' references to the old tensors end with the call.
int64_t move_params(RankTrainer::State& st, const std::vector<LocalParam>& old,
                    std::vector<LocalParam>& next, const std::vector<std::vector<Box>>& have,
                    const std::vector<std::vector<Box>>& want) {
  std::vector<ExchangeItem> items;  // one per (parameter, tensor kind)
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < old.size(); ++i) {
    const ExchangeItem item{old[i].shard.full_shape, have[i], want[i]};
    const LocalParam& p = old[i];
    for (const at::Tensor& t : {p.value.detach(), p.adam.exp_avg, p.adam.exp_avg_sq}) {
      items.push_back(item);
      inputs.push_back(t);
    }
  }
  const ExchangePlan plan(std::move(items), st.rank, st.world);
  std::vector<at::Tensor> outs =
      plan.run(st.groups->world().world(), inputs, /*keep_unchanged=*/true);
  size_t k = 0;
  for (size_t i = 0; i < next.size(); ++i) {
    next[i].value = outs[k++].set_requires_grad(true);
    next[i].adam.exp_avg = outs[k++];
    next[i].adam.exp_avg_sq = outs[k++];
    next[i].adam.step = old[i].adam.step;
  }
  return plan.elements_received();
}

// The outer parameters (replicated on their holders, outer_holders) when their holders change
// (the active ranks, or the first or last stage): a rank that stops holding one drops its copy,
// one that starts receives it with its AdamW moments from the nearest holder. Returns the
// elements this rank received (0, with nothing exchanged, when no holder changes).
int64_t move_outer(RankTrainer::State& st, const Plan& next_plan,
                   const std::vector<int>& next_active) {
  std::vector<LocalParam> next =
      make_outer(st.model, next_plan, st.rank, st.world, nullptr, next_active);
  const auto holds = [](const std::vector<int>& a, int q) {
    return std::binary_search(a.begin(), a.end(), q);
  };
  std::vector<std::vector<Box>> have(st.outer.size()), want(st.outer.size());
  bool same = true;
  for (size_t i = 0; i < st.outer.size(); ++i) {
    const std::string& name = st.outer[i].shard.name;
    const Box whole = Box::whole(st.outer[i].shard.full_shape);
    const auto before = outer_holders(st.model, st.plan, name, st.world, st.active);
    const auto after = outer_holders(st.model, next_plan, name, st.world, next_active);
    same = same && before == after;
    for (int q = 0; q < st.world; ++q) {
      have[i].push_back(held_box(whole, holds(before, q)));
      want[i].push_back(held_box(whole, holds(after, q)));
    }
  }
  if (same) {  // the same ranks hold every outer parameter: only groups may be renewed
    for (size_t i = 0; i < next.size(); ++i) {
      next[i].value = st.outer[i].value;
      next[i].adam = st.outer[i].adam;
    }
    st.outer = std::move(next);
    return 0;
  }
  const int64_t received = move_params(st, st.outer, next, have, want);
  st.outer = std::move(next);
  return received;
}

}  // namespace

RepartitionStats RankTrainer::repartition(const Plan& next) {
  State& st = *state_;
  const double t0 = now_s(st.options.device);
  if (next.size() != st.model.num_blocks())
    throw std::invalid_argument("repartition: plan has " + std::to_string(next.size()) +
                                " blocks, model " + std::to_string(st.model.num_blocks()));
  const std::string why = why_live_plan_invalid(st.model, next, st.world);
  if (!why.empty()) throw std::invalid_argument("repartition to " + next.to_string() + ": " + why);
  c10::NoGradGuard no_grad;
  st.groups->create(plan_group_sets(st.model, next, st.world));
  const std::vector<int> next_active = active_ranks(next, st.world);
  const bool active_changed = next_active != st.active;

  std::vector<int> changed;
  for (int b = 0; b < next.size(); ++b)
    if (active_changed || next.blocks[b] != st.plan.blocks[b] ||
        block_stage(next, b, st.world) != block_stage(st.plan, b, st.world))
      changed.push_back(b);

  int64_t received = 0;
  for (int b : changed) {
    BlockState nb =
        make_block(st.model, next, b, st.rank, st.world, *st.groups, nullptr, next_active);
    std::vector<std::vector<ParamShard>> old_shards(st.world), new_shards(st.world);
    bool same_boxes = true;
    for (int q = 0; q < st.world; ++q) {
      old_shards[q] = held_param_shards(st.model, st.plan, b, q, st.world, st.active);
      new_shards[q] = held_param_shards(st.model, next, b, q, st.world, next_active);
      for (size_t i = 0; i < old_shards[q].size(); ++i)
        same_boxes = same_boxes && old_shards[q][i].box == new_shards[q][i].box;
    }
    if (same_boxes) {  // only chunks, recompute or sp differ: the tensors stay as they are
      for (size_t i = 0; i < nb.params.size(); ++i) {
        nb.params[i].value = st.blocks[b].params[i].value;
        nb.params[i].adam = st.blocks[b].params[i].adam;
      }
      st.blocks[b] = std::move(nb);
      continue;
    }
    std::vector<std::vector<Box>> have(nb.params.size()), want(nb.params.size());
    for (size_t i = 0; i < nb.params.size(); ++i)
      for (int q = 0; q < st.world; ++q) {
        have[i].push_back(old_shards[q][i].box);
        want[i].push_back(new_shards[q][i].box);
      }
    received += move_params(st, st.blocks[b].params, nb.params, have, want);
    st.blocks[b] = std::move(nb);  // releases the old values, moments and gradients
  }
  received += move_outer(st, next, next_active);
  st.plan = next;
  st.active = next_active;
  st.is_active = rank_active(next, st.rank, st.world);
  st.place_stage();
  st.act_plans.clear();

  RepartitionStats stats;
  stats.blocks_changed = static_cast<int>(changed.size());
  stats.bytes_received = static_cast<double>(received) *
                         static_cast<double>(c10::elementSize(st.options.dtype));
  stats.seconds = now_s(st.options.device) - t0;
  return stats;
}

}  // namespace shardgym::live
