#include "runtime/live/tp/micro_batches.h"

#include <algorithm>
#include <limits>

#include "runtime/core/data_shares.h"

namespace shardgym::live {

std::string why_live_plan_invalid(const ModelSpec& model, const Plan& plan, int world) {
  const Pipeline& pp = plan.pipeline;
  if (pp.stages > 1 && pp.schedule == Schedule::kInterleaved)
    return "pipeline: schedule=interleaved is priced by the simulator only; live ranks run "
           "schedule=1f1b and schedule=gpipe";
  if (pp.stages > 1 && !pp.shares.empty())
    return "data shares " + shares_to_string(pp.shares) + " with p=" +
           std::to_string(pp.stages) + " pipeline stages: live ranks run uneven shares "
           "without a pipeline only";
  if (plan.pipeline.context != 1)
    return "@cp(" + std::to_string(plan.pipeline.context) +
           "): context parallelism is priced by the simulator only; the live ranks split batches, "
           "not sequences";
  if (std::string why = shares_invalid_reason(plan, model, world); !why.empty()) return why;
  Plan whole = plan;  // the stages as the plan has them, the whole batch in one micro-batch
  whole.pipeline.micro_batches = 1;
  whole.pipeline.shares.clear();
  return whole.validate(model, world);
}

bool rank_active(const Plan& plan, int rank, int world) {
  const std::vector<int>& w = plan.pipeline.shares;
  const int n = static_cast<int>(w.size());
  return n == 0 || world % n != 0 || w[rank / (world / n)] > 0;
}

std::vector<int> active_ranks(const Plan& plan, int world) {
  std::vector<int> out;
  for (int q = 0; q < world; ++q)
    if (rank_active(plan, q, world)) out.push_back(q);
  return out;
}

BatchRows batch_rows(const Plan& plan, int64_t global_batch) {
  if (plan.pipeline.shares.empty() || global_batch <= 0 ||
      global_batch > std::numeric_limits<int>::max())
    return BatchRows::whole(global_batch);
  BatchRows rows;
  for (int s : apportion(static_cast<int>(global_batch), plan.pipeline.shares))
    rows.rows.push_back(s);
  return rows;
}

BatchRows micro_batch_rows(const BatchRows& rows, int micro_batches) {
  BatchRows out = rows;
  for (int64_t& r : out.rows) r /= std::max(1, micro_batches);
  return out;
}

namespace {

// why_micro_batches_invalid with share groups: the even plan's rules group by group.
std::string why_shared_batch_invalid(const Plan& plan, int world, int64_t G, int64_t m) {
  const std::string ms = "micro_batches = " + std::to_string(m);
  const BatchRows rows = batch_rows(plan, G);
  const int n = static_cast<int>(rows.rows.size());
  if (world < 1 || n < 1 || world % n != 0) return "";  // shares_invalid_reason says why
  const int g = world / n;
  const std::string shares = "data shares " + shares_to_string(plan.pipeline.shares);
  for (int i = 0; i < n; ++i) {
    const int64_t s = rows.rows[i];
    const std::string group = "share group " + std::to_string(i) + " (" + std::to_string(s) +
                              " of the global batch's " + std::to_string(G) + " sequences, " +
                              shares + ")";
    if (s % g != 0)
      return group + " does not split over its " + std::to_string(g) + " ranks";
    if ((s / g) % m != 0)
      return ms + " does not divide the " + std::to_string(s / g) + " sequences per rank of " +
             group;
    for (int b = 0; b < plan.size(); ++b) {
      const Strategy& st = plan.blocks[b];
      const int64_t per_group = st.replicas(world) / n;
      if (per_group < 1 || s % per_group != 0) continue;  // shares_invalid_reason says why
      const int64_t local = s / per_group;
      if (st.chunks > 1 && (local / m) % st.chunks != 0)
        return ms + ": block " + std::to_string(b) + " (" + st.to_string() + ") takes " +
               std::to_string(local / m) + " sequences per micro-batch in " + group +
               ", which do not split into chunks=" + std::to_string(st.chunks);
    }
  }
  return "";
}

}  // namespace

std::string why_micro_batches_invalid(const ModelSpec& model, const Plan& plan, int world,
                                      int64_t global_batch, int micro_batches) {
  const int64_t G = global_batch, m = micro_batches;
  const std::string ms = "micro_batches = " + std::to_string(m);
  if (m < 1) return ms + ": must be at least 1";
  if (!plan.pipeline.shares.empty()) return why_shared_batch_invalid(plan, world, G, m);
  // With p stages every block and the embedding run over one stage's P/p ranks.
  const int stages = std::max(1, plan.pipeline.stages);
  const std::string ranks = stages == 1 ? " ranks" : " ranks per pipeline stage";
  if (world < stages || world % stages != 0) return "";  // Plan::validate says why
  world /= stages;
  if (world < 1 || G % world != 0)
    return "global batch " + std::to_string(G) + " is not a multiple of " +
           std::to_string(world) + ranks;
  for (int b = 0; b < plan.size() && b < model.num_blocks(); ++b) {
    const Strategy& s = plan.blocks[b];
    const int64_t replicas = s.replicas(world);
    if (replicas < 1 || G % replicas != 0) continue;  // Plan::validate / the batch check say why
    const int64_t local = G / replicas;
    const std::string block = "block " + std::to_string(b) + " (" + s.to_string() + ")";
    if (local % m != 0)
      return ms + " does not divide the local batch of " + std::to_string(local) +
             " sequences of " + block + " (global batch " + std::to_string(G) + " over " +
             std::to_string(replicas) + " replicas)";
    if (s.chunks > 1 && (local / m) % s.chunks != 0)
      return ms + ": " + block + " takes " + std::to_string(local / m) +
             " sequences per micro-batch (local batch " + std::to_string(local) +
             "), which do not split into chunks=" + std::to_string(s.chunks);
  }
  const int64_t local = G / world;
  if (local % m != 0)
    return ms + " does not divide the local batch of " + std::to_string(local) +
           " sequences of each rank's embedding and LM head (global batch " + std::to_string(G) +
           ", data parallel over " + std::to_string(world) + ranks + ")";
  return "";
}

}  // namespace shardgym::live
