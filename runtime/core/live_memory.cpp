#include "runtime/core/live_memory.h"

#include <algorithm>

#include "runtime/core/cost.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
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
  // The last stage: the final norm and the LM head (tied: its own copy of wte, whose gradient
  // is all-reduced with the first stage's); the token and position embeddings are the first's.
  if (last)
    params += static_cast<double>(model.embedding_params()) -
              static_cast<double>(model.input_embedding_params()) +
              (!first && model.tied_embeddings ? static_cast<double>(model.vocab) * model.hidden
                                               : 0);
  // recompute_transient: at a recomputed block's backward, the blocks after it have released
  // their activations of that micro-batch; the blocks before it hold theirs, and it holds its
  // rebuilt ones.
  double per_micro_batch = 0, recompute_transient = 0;
  for (int b = b0; b < b1; ++b) {
    const BlockKind kind = ModelSpec::block_kind(b);
    const Strategy& s = plan.blocks[b];
    params += block_rank_params(model, kind, s);
    if (s.recompute) {
      recompute_transient = std::max(
          recompute_transient, per_micro_batch + recompute_peak_bytes(model, kind, s, world));
    }
    // The live ranks checkpoint block by block: a recomputed MLP keeps its own input (the
    // attention block's output) where Megatron-LM's full-layer recomputation keeps none.
    per_micro_batch += block_activation_bytes(model, kind, s, world, /*prev_recomputes=*/false) +
                       kept_gather_bytes(model, s, world);
  }
  // The backward holds the most at one of three moments (measured with the allocator meter,
  // docs/live-fidelity.md, "What a stage holds at its peak"), each with every micro-batch in
  // flight held, and on a stage other than the last each micro-batch's output, kept for its
  // backward (the next stage's input):
  //   - the loss's backward (last stage): the head's activations of every micro-batch in
  //     flight (the final norm's output [b,s,h] and the log-probabilities [b,s,V]; the norm's
  //     input is the last block's output) and the loss's two gradients ([b,s,V] each) at once;
  //   - the stage's top block's backward (an MLP not recomputed): the gradient of its hidden
  //     activation [b,s,f/t] and of fc2's weight;
  //   - a recomputed block's backward: one micro-batch fewer, the blocks before it, and its own
  //     rebuilt (recompute_transient).
  const double d = dtype_bytes(model.dtype);
  const double rows = static_cast<double>(effective_global_batch(model, world)) / world;
  const double bs = rows * model.seq;  // tokens of a micro-batch in the stage's DP layout
  const double held = in_flight * (per_micro_batch + (last ? 0 : bs * model.hidden * d));
  double top = 0;
  if (last) top = d * (in_flight * (bs * model.hidden + bs * model.vocab) + 2 * bs * model.vocab);
  if (b1 > b0 && ModelSpec::block_kind(b1 - 1) == BlockKind::kMlp &&
      !plan.blocks[b1 - 1].recompute) {
    const Strategy& s_top = plan.blocks[b1 - 1];
    const double t = s_top.degree(), f = model.ffn_size() * (model.swiglu ? 2.0 : 1.0);
    const double tokens = static_cast<double>(local_batch(model, s_top, world)) * model.seq;
    top = std::max(top, d * (tokens * f / t + f * model.hidden / t));
  }
  e.activation_bytes = std::max(held + top, held - per_micro_batch + recompute_transient);
  e.state_bytes = params * model.state_bytes_per_param();
  return e;
}

}  // namespace

std::vector<MemoryEstimate> live_stage_memory_estimates(const ModelSpec& batch_model,
                                                        const Plan& plan, int world,
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
  if (p == 1 || world % p != 0)
    return {stage_estimate(model, plan, 0, plan.size(), world, 1, true, true)};
  // Pipeline stages (runtime/live/tp/pipeline.cpp): a stage's micro-batch is the same G/m
  // sequences over its P/p ranks.
  const std::vector<int> stage_of = plan.block_stages();
  std::vector<MemoryEstimate> out;
  for (int s = 0, b0 = 0; s < p; ++s) {
    int b1 = b0;
    while (b1 < plan.size() && stage_of[b1] == s) ++b1;
    const int in_flight =
        plan.pipeline.schedule == Schedule::kGPipe ? m : std::min(p - s, m);
    out.push_back(stage_estimate(model, plan, b0, b1, world / p, in_flight, s == 0, s == p - 1));
    b0 = b1;
  }
  return out;
}

MemoryEstimate live_memory_estimate(const ModelSpec& model, const Plan& plan, int world,
                                    int micro_batches) {
  MemoryEstimate most;
  for (const MemoryEstimate& e : live_stage_memory_estimates(model, plan, world, micro_batches))
    if (e.total() > most.total()) most = e;
  return most;
}

}  // namespace shardgym
