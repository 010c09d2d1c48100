#include "runtime/live/tp/micro_batches.h"

namespace shardgym::live {

std::string why_live_plan_invalid(const ModelSpec& model, const Plan& plan, int world) {
  if (plan.pipeline.stages != 1)
    return "pipeline: p=" + std::to_string(plan.pipeline.stages) +
           " stages, but the live runtime runs one stage over all ranks";
  if (!plan.pipeline.shares.empty())
    return "data shares: the live runtime trains even shares only (uneven shares and "
           "excluded ranks are simulated; docs/design.md §11)";
  Plan whole = plan;
  whole.pipeline = Pipeline{};
  whole.pipeline.micro_batches = 1;
  return whole.validate(model, world);
}

std::string why_micro_batches_invalid(const ModelSpec& model, const Plan& plan, int world,
                                      int64_t global_batch, int micro_batches) {
  const int64_t G = global_batch, m = micro_batches;
  const std::string ms = "micro_batches = " + std::to_string(m);
  if (m < 1) return ms + ": must be at least 1";
  if (world < 1 || G % world != 0)
    return "global batch " + std::to_string(G) + " is not a multiple of " +
           std::to_string(world) + " ranks";
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
           ", data parallel over " + std::to_string(world) + " ranks)";
  return "";
}

}  // namespace shardgym::live
