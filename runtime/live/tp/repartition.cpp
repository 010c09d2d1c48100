// RankTrainer::repartition: moving blocks to new strategies between two iterations.
//
// For every block whose strategy changes, each parameter and its AdamW moments (exp_avg,
// exp_avg_sq) go from the old boxes to the new ones through one ExchangePlan: a rank copies
// what it already holds and receives only the cells it lacks, each from the nearest holder
// (exchange.h). The AdamW step counter is a per-parameter scalar that every rank already holds
// (every rank holds a piece of every parameter and all pieces step together), so it moves
// without traffic. Gradients are not moved: they are recomputed by the next step.
// Blocks whose placement is unchanged (only chunks, recompute or sp differ) move nothing.
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_state.h"

namespace shardgym::live {

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

  std::vector<int> changed;
  for (int b = 0; b < next.size(); ++b)
    if (next.blocks[b] != st.plan.blocks[b]) changed.push_back(b);

  // One item per (block, parameter, tensor kind); every rank lists them in the same order.
  std::vector<ExchangeItem> items;
  std::vector<at::Tensor> inputs;
  std::vector<BlockState> fresh;
  for (int b : changed) {
    const Strategy& from = st.plan.blocks[b];
    const Strategy& to = next.blocks[b];
    std::vector<std::vector<ParamShard>> old_shards(st.world), new_shards(st.world);
    for (int q = 0; q < st.world; ++q) {
      old_shards[q] = block_param_shards(st.model, b, place_block(from, q, st.world));
      new_shards[q] = block_param_shards(st.model, b, place_block(to, q, st.world));
    }
    const BlockState& old_block = st.blocks[b];
    for (size_t i = 0; i < old_block.params.size(); ++i) {
      ExchangeItem item;
      item.full_shape = old_shards[0][i].full_shape;
      for (int q = 0; q < st.world; ++q) {
        item.have.push_back(old_shards[q][i].box);
        item.want.push_back(new_shards[q][i].box);
      }
      const LocalParam& p = old_block.params[i];
      for (const at::Tensor& t : {p.value.detach(), p.adam.exp_avg, p.adam.exp_avg_sq}) {
        items.push_back(item);
        inputs.push_back(t);
      }
    }
    fresh.push_back(make_block(st.model, b, to, st.rank, st.world, *st.groups, nullptr));
  }

  const ExchangePlan plan(std::move(items), st.rank, st.world);
  std::vector<at::Tensor> outs = plan.run(st.groups->world().world(), inputs);

  size_t k = 0;
  for (size_t c = 0; c < changed.size(); ++c) {
    BlockState& nb = fresh[c];
    const BlockState& old_block = st.blocks[changed[c]];
    for (size_t i = 0; i < nb.params.size(); ++i) {
      LocalParam& p = nb.params[i];
      p.value = outs[k++].set_requires_grad(true);
      p.adam.exp_avg = outs[k++];
      p.adam.exp_avg_sq = outs[k++];
      p.adam.step = old_block.params[i].adam.step;
    }
    st.blocks[changed[c]] = std::move(nb);
  }
  st.plan = next;
  st.act_plans.clear();

  RepartitionStats stats;
  stats.blocks_changed = static_cast<int>(changed.size());
  stats.bytes_received = static_cast<double>(plan.elements_received()) *
                         static_cast<double>(c10::elementSize(st.options.dtype));
  stats.seconds = now_s(st.options.device) - t0;
  return stats;
}

}  // namespace shardgym::live
