#include "runtime/live/launch/memory_estimate.h"

#include <algorithm>

#include "runtime/core/cost.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/strategy_family.h"

namespace shardgym::live {
namespace {

// What the live layers keep beyond the paper's count: with sequence parallelism the
// all-gathered GEMM input [s, b, h] stays saved for the backward (Megatron gathers it again
// instead), i.e. 2·sbh·(1 − 1/t) more than the paper's sharded 2·sbh/t.
double kept_gather_bytes(const ModelSpec& m, const Strategy& s, int world) {
  if (s.recompute || !family_of(s).sequence_parallel(s)) return 0;
  const double sbh = double(m.seq) * local_batch(m, s, world) * m.hidden;
  return dtype_bytes(m.dtype) / 2.0 * 2 * sbh * (1 - 1.0 / s.degree());
}

// The backward of a recomputed block rebuilds its activations and, for attention, holds the
// gradients of the softmax output and input ([a/t, s, s] per sequence each) at the same time.
double recompute_peak_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s, int world) {
  Strategy stored = s;
  stored.recompute = false;
  double bytes = block_activation_bytes(m, kind, stored, world, false) +
                 kept_gather_bytes(m, stored, world);
  if (kind == BlockKind::kAttention) {
    const double as2b = double(m.heads) * m.seq * m.seq * local_batch(m, s, world);
    bytes += dtype_bytes(m.dtype) * 2 * as2b * s.max_part() / s.degree();
  }
  return bytes;
}

}  // namespace

namespace {

// One rank of the stage holding blocks [b0, b1), over `world` ranks (the stage's), with
// `in_flight` micro-batches' activations alive at its peak (one without a pipeline; under 1F1B
// stage s holds min(p − s, m), under GPipe all m) and the first and last stage's outer parts.
MemoryEstimate stage_estimate(const ModelSpec& model, const Plan& plan, int b0, int b1,
                              int world, int in_flight, bool first, bool last) {
  MemoryEstimate e;
  double params = 0;
  if (first) params += static_cast<double>(model.input_embedding_params());
  if (last)
    params += static_cast<double>(model.embedding_params()) -
              (first ? static_cast<double>(model.input_embedding_params()) : 0) +
              (!first && model.tied_embeddings ? static_cast<double>(model.vocab) * model.hidden
                                               : 0);
  double per_micro_batch = 0, recompute_transient = 0;
  for (int b = b0; b < b1; ++b) {
    const BlockKind kind = ModelSpec::block_kind(b);
    const Strategy& s = plan.blocks[b];
    params += block_rank_params(model, kind, s);
    const bool prev_recomputes = kind == BlockKind::kMlp && b > b0 && plan.blocks[b - 1].recompute;
    per_micro_batch += block_activation_bytes(model, kind, s, world, prev_recomputes) +
                       kept_gather_bytes(model, s, world);
    if (s.recompute) {
      recompute_transient =
          std::max(recompute_transient, recompute_peak_bytes(model, kind, s, world));
    }
  }
  e.activation_bytes = per_micro_batch * in_flight + recompute_transient;
  e.state_bytes = params * model.state_bytes_per_param();
  if (last) {  // the LM head's, alive for as many micro-batches as the stage's blocks
    const double rows = static_cast<double>(effective_global_batch(model, world)) / world;
    const double bs = rows * model.seq;
    e.activation_bytes +=
        in_flight * dtype_bytes(model.dtype) * (2 * bs * model.hidden + 2 * bs * model.vocab);
  }
  return e;
}

}  // namespace

MemoryEstimate live_memory_estimate(const ModelSpec& batch_model, const Plan& plan, int world,
                                    int micro_batches) {
  ModelSpec model = batch_model;  // the activations below are those of one micro-batch
  // The live GPT has no dropout: Korthikanti et al.'s masks and dropout outputs (an sbh mask
  // per block, 3·as²b in attention) are not kept (cost.h counts them only with dropout).
  model.dropout = false;
  int64_t batch = effective_global_batch(batch_model, world);
  if (const std::vector<int>& w = plan.pipeline.shares; !w.empty() && batch > 0) {
    // Uneven shares (data_shares.h): the rank of the largest group holds the most activations,
    // as many as every rank would under an even batch of n times that group's sequences.
    const std::vector<int> seqs = apportion(static_cast<int>(batch), w);
    batch = static_cast<int64_t>(*std::max_element(seqs.begin(), seqs.end())) *
            static_cast<int64_t>(w.size());
  }
  if (micro_batches > 1 || batch != effective_global_batch(batch_model, world))
    model.global_batch = static_cast<int>(batch / std::max(1, micro_batches));
  const int p = std::max(1, plan.pipeline.stages), m = std::max(1, micro_batches);
  if (p == 1 || world % p != 0) return stage_estimate(model, plan, 0, plan.size(), world, 1, true, true);
  // Pipeline stages (runtime/live/tp/pipeline.cpp): the rank of the stage with the most.
  // A stage's micro-batch is the same G/m sequences over its P/p ranks.
  const std::vector<int> stage_of = plan.block_stages();
  MemoryEstimate most;
  for (int s = 0, b0 = 0; s < p; ++s) {
    int b1 = b0;
    while (b1 < plan.size() && stage_of[b1] == s) ++b1;
    const int in_flight =
        plan.pipeline.schedule == Schedule::kGPipe ? m : std::min(p - s, m);
    const MemoryEstimate e =
        stage_estimate(model, plan, b0, b1, world / p, in_flight, s == 0, s == p - 1);
    if (e.total() > most.total()) most = e;
    b0 = b1;
  }
  return most;
}

}  // namespace shardgym::live
