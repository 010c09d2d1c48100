// Gradient accumulation in the live runtime: an iteration's global batch [G, S] runs as m
// micro-batches, each a forward and a backward; gradients add up, and the gradient
// synchronisation and the optimizer step run once per iteration (docs/design.md §4).
//
// The split keeps every row with the replica that computes it without micro-batches: rank q's
// rows [q·G/P, (q+1)·G/P) (embedding, LM head, dp blocks) are cut into m equal slices, and
// micro-batch i is slice i of every rank, in rank order — a batch of G/m rows under the same
// convention (rank_trainer.h). A block's replica r then takes, in micro-batch i, slice i of its
// own rows [r·G/R, (r+1)·G/R). The loss is summed over the micro-batches with the mean taken
// over all G·S tokens, so the loss and the gradients are the single batch's up to the order
// of the sums.
//
// Uneven data-parallel shares (`@dp(w=...)`, runtime/core/data_shares.h): the batch's rows go
// to the share groups in group order, G·w_i/Σw to group i (batch_rows), and inside a group the
// rules above hold with the group's rows for G and its g = P/n ranks for P: each rank takes
// s_i/g rows, each micro-batch s_i/m of group i. The loss is still the mean over all G·S
// tokens and gradients are summed, so the update is the even plan's. A weight of 0 excludes its
// group (active_ranks): its ranks take no rows, hold no state and join no collective of a step.
//
// Torch-free, so that LiveRun can reject an m before any rank sees it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/placement.h"
#include "runtime/core/plan.h"

namespace shardgym::live {

// Empty if live ranks can run `plan`, else why. They run a plan's pipeline stages (GPipe or
// 1F1B, pipeline.cpp) and are handed m per iteration (RankTrainer::train_step), so the plan is
// checked with its stages and the whole batch in one micro-batch (Plan::validate with m = 1);
// its own m (explicit, or derived from model.micro_batch) is not read here. Refused: the
// interleaved schedule, context parallelism, and data shares together with stages.
std::string why_live_plan_invalid(const ModelSpec& model, const Plan& plan, int world);

// The ranks that train under `plan` on `world` ranks, ascending: every rank without shares, else
// the ranks of the share groups with a positive weight (group i: ranks [i·g, (i+1)·g), g =
// world / n). Excluded ranks hold no parameters or optimizer state (docs/design.md §11).
std::vector<int> active_ranks(const Plan& plan, int world);
bool rank_active(const Plan& plan, int rank, int world);

// The rows of a batch of `global_batch` sequences by share group (one group without shares).
BatchRows batch_rows(const Plan& plan, int64_t global_batch);
// Those of each of m micro-batches of it: every group's rows over m.
BatchRows micro_batch_rows(const BatchRows& rows, int micro_batches);

// Empty if `micro_batches` micro-batches can run `plan` on a global batch of `global_batch`
// sequences over `world` ranks, else why: m must be ≥ 1 and divide the local batch of every
// tensor-parallel group (G/replicas for each block, G/P for the embedding and LM head; with p
// stages, replicas and P are those of one stage's P/p ranks), and a
// block's micro-batch rows per replica must split into its chunks. With shares, the same per
// group, and each group's rows must split over its ranks.
std::string why_micro_batches_invalid(const ModelSpec& model, const Plan& plan, int world,
                                      int64_t global_batch, int micro_batches);

}  // namespace shardgym::live
