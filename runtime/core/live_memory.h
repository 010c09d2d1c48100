// Analytic peak memory of one rank of the live run (runtime/live/tp runs the model): what the
// allocator meter is checked against, what LiveRun's action mask uses, and what the simulator
// prices for a model with `live_layers` (model_spec.h). From runtime/core's formulas:
//
//   state       = (embedding + LM head + Σ_blocks params held by the rank) · state bytes/param
//                 (live runs keep params, grads, exp_avg, exp_avg_sq in the model dtype)
//   activations = the fullest of three moments of the backward (measured with the allocator
//                 meter, docs/live-fidelity.md, "What a stage holds at its peak"), each with
//                 every micro-batch in flight held and, on a stage before the last, each one's
//                 stage output kept for its backward:
//                   the loss's backward (last stage): the head's activations of each micro-
//                     batch (final norm output [b,s,h], log-probabilities [b,s,V]) and the
//                     loss's two gradients [b,s,V];
//                   the stage's top MLP's backward: its hidden gradient and fc2's weight's;
//                   a recomputed block's backward: one micro-batch fewer, the blocks before
//                     it, and its own rebuilt (plus, in attention, the two score gradients)
//                 with a block's activations Korthikanti's (cost.h) adjusted to the live
//                 layers: − the dropout terms (the live GPT has no dropout), + with sp=1 the
//                 all-gathered GEMM input the layers keep for backward, block-by-block
//                 checkpoints (a recomputed MLP keeps its input).
#pragma once

#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"

namespace shardgym {

struct MemoryEstimate {
  double state_bytes = 0;
  double activation_bytes = 0;
  double total() const { return state_bytes + activation_bytes; }
};

// Per rank (every rank holds the same amount under the strategies of docs/design.md §3). With
// `micro_batches` = m (gradient accumulation) one micro-batch's activations are alive at a
// time: the activations of a global batch of G/m; the state does not change. With p pipeline
// stages, the rank of the stage that holds the most: its blocks' state (and the embedding on
// the first stage, the final norm and LM head on the last, wte on both when tied), and the
// activations of the micro-batches it holds at once (1F1B: min(p − s, m) on stage s; GPipe: m)
// over its P/p ranks.
MemoryEstimate live_memory_estimate(const ModelSpec& model, const Plan& plan, int world,
                                    int micro_batches = 1);
// Per stage (one entry without a pipeline): what each of its ranks holds.
std::vector<MemoryEstimate> live_stage_memory_estimates(const ModelSpec& model, const Plan& plan,
                                                        int world, int micro_batches = 1);

}  // namespace shardgym
