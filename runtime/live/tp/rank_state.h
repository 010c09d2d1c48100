// Internal to runtime/live/tp: what a RankTrainer holds, shared by rank_trainer.cpp (steps,
// gradients, optimizer), tp_model.cpp (the forward pass) and repartition.cpp.
//
// Length: the one state three files of the rank trainer share, kept in one place.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"
#include "runtime/live/comm/comm.h"
#include "runtime/live/tp/adamw.h"
#include "runtime/live/tp/exchange.h"
#include "runtime/core/placement.h"
#include "runtime/live/tp/rank_trainer.h"
#include "runtime/live/tp/tp_common.h"

namespace shardgym::live {

struct LocalParam {
  ParamShard shard;      // name, full shape, this rank's box
  at::Tensor value;      // leaf that requires grad, shaped like shard.box
  AdamWState adam;
  std::vector<int> grad_sum;  // ranks whose gradients of this box are summed
  int holders = 1;            // ranks holding the same box: weight 1/holders in the norm
  bool primary = true;        // the lowest rank holding this box (writes it when gathering)
};

struct BlockState {
  BlockContext ctx;
  std::vector<LocalParam> params;  // block_param_shards order
  std::vector<at::Tensor> values() const;
};

// Comm lookup for the trainer: singletons get a local identity Comm, the full set the world's
// group; other sets are created collectively, in one canonical order, by create().
class Groups {
 public:
  explicit Groups(CommWorld& world);
  ~Groups();
  // Collective: every rank passes the same sets (any order, duplicates allowed).
  void create(std::vector<std::vector<int>> sets);
  Comm& get(const std::vector<int>& ranks);
  CommWorld& world() { return world_; }
  // Seconds this rank spent in collectives of every group handed out so far.
  double wait_s() const;

 private:
  CommWorld& world_;
  std::unique_ptr<Comm> self_;
  std::set<Comm*> used_;
};

// Exchange plans of the residual stream for one global batch size.
struct ActivationPlans {
  // into[b]: from the previous layout (embedding's for b = 0) into block b's; out: from the last
  // block's into the LM head's. Null where the layouts agree on every rank.
  std::vector<std::unique_ptr<ExchangePlan>> into_fwd, into_bwd;
  std::unique_ptr<ExchangePlan> out_fwd, out_bwd;
};

// The ranks of one pipeline stage (runtime/core/plan.h: stage s holds ranks [s·P/p, (s+1)·P/p)).
// A block's strategy acts within its stage: placement, groups and exchanges use the stage-local
// rank q − first over `size` ranks, and global() maps their rank sets back to the world's.
struct StageRanks {
  int index = 0;  // the stage
  int first = 0;  // its first global rank
  int size = 1;   // its ranks, P/p
  bool holds(int q) const { return q >= first && q < first + size; }
  std::vector<int> ranks() const;
  std::vector<int> global(const std::vector<int>& local) const;
  bool operator==(const StageRanks& o) const {
    return index == o.index && first == o.first && size == o.size;
  }
  bool operator!=(const StageRanks& o) const { return !(*this == o); }
};
// The stage that runs block b, and the stage of rank q.
StageRanks block_stage(const Plan& plan, int b, int world);
StageRanks rank_stage(const Plan& plan, int q, int world);

struct RankTrainer::State {
  ModelSpec model;
  Plan plan;
  TrainerOptions options;
  int rank = 0, world = 1;
  // The plan's training ranks (active_ranks, micro_batches.h) and whether this is one: an
  // excluded rank holds empty shards, computes nothing and joins no collective of a step.
  std::vector<int> active;
  bool is_active = true;
  StageRanks stage;  // this rank's pipeline stage (the whole world with one stage)
  Comm* stage_comm = nullptr;   // its ranks' group (the world's with one stage)
  std::vector<uint8_t> here;    // per block: 1 where the block runs on this rank's stage
  // stage, stage_comm and here for the plan in force (after the plan's groups exist).
  void place_stage();
  bool on_stage(size_t b) const { return here[b] != 0; }
  std::unique_ptr<Groups> groups;
  std::vector<BlockState> blocks;  // sized once: BlockContext addresses stay valid
  std::vector<LocalParam> outer;   // wte, wpe, ln_f.weight, ln_f.bias, lm_head.weight (those
                                   // the model has: outer_param_shards)
  double stretch = 1.0;  // set_compute_stretch
  std::map<BatchRows, ActivationPlans> act_plans;  // by the batch's rows per share group
  // Backward timing probes: per block, hooks called when the gradient reaches the block's
  // output (start) and its input (end).
  std::vector<std::function<void()>> probe_out, probe_in;
  std::vector<double> bwd_t0, bwd_w0, bwd_t1, bwd_w1;

  const LocalParam& outer_param(const std::string& name) const;
  at::Tensor outer_value(const std::string& name) const { return outer_param(name).value; }
  // Every LocalParam of the rank, blocks first (in order), then the outer ones.
  std::vector<LocalParam*> all_params();
};

// Every rank set the plan's blocks use on any rank (g1, g2, and over the plan's active ranks
// the data groups and gradient sums), each stage's ranks, the holders of each outer parameter,
// the active ranks and the world.
std::vector<std::vector<int>> plan_group_sets(const ModelSpec& m, const Plan& plan, int world);

// `box` where `holds` (the rank trains), else an empty box of the same rank: what a rank holds
// of a tensor under a plan that may exclude it.
Box held_box(const Box& box, bool holds);
// Parameter shards of block b on rank q under `plan`, their boxes empty where q is not in
// `active` (sorted) or not in the block's stage.
std::vector<ParamShard> held_param_shards(const ModelSpec& m, const Plan& plan, int b, int q,
                                          int world, const std::vector<int>& active);
// The ranks of `ranks` that are also in `active` (both sorted).
std::vector<int> only_active(const std::vector<int>& ranks, const std::vector<int>& active);

// Block b on this rank under `plan`: placement, comms (created beforehand), and its parameters
// taken from `full` (a map of full tensors) with fresh AdamW state. `full` may be null: then
// the parameters are left undefined for the caller to fill. `active`: the plan's training ranks
// (active_ranks); gradient sums, holders and the primary holder count those only, and a rank
// outside them, or outside the block's pipeline stage, holds empty shards.
BlockState make_block(const ModelSpec& m, const Plan& plan, int b, int rank, int world,
                      Groups& groups, const std::map<std::string, at::Tensor>* full,
                      const std::vector<int>& active);

// The ranks that hold outer parameter `name` under `plan`, ascending: the active ranks of the
// stages that use it (the embedding the first, the final norm and LM head the last; with tied
// embeddings wte both, so that its gradient is summed between them, as Megatron-LM's
// _allreduce_word_embedding_grads does).
std::vector<int> outer_holders(const ModelSpec& m, const Plan& plan, const std::string& name,
                               int world, const std::vector<int>& active);
// This rank's outer parameters (outer_param_shards: wte, wpe, ln_f, lm_head), replicated over
// their holders (empty elsewhere), with values from `full` and fresh AdamW state, or undefined.
std::vector<LocalParam> make_outer(const ModelSpec& m, const Plan& plan, int rank, int world,
                                   const std::map<std::string, at::Tensor>* full,
                                   const std::vector<int>& active);

// Residual-stream exchange plans for a batch with these rows per share group (built on first
// use, then cached).
const ActivationPlans& activation_plans(RankTrainer::State& st, const BatchRows& rows);

// Throws std::invalid_argument unless tokens and targets are int64 [G, seq] with G a
// multiple of the world (without shares; with shares why_micro_batches_invalid checks G).
void check_batch(const RankTrainer::State& st, const at::Tensor& tokens,
                 const at::Tensor& targets);

// The pieces of one forward pass over this rank's stage, for run_model and the pipeline
// (pipeline.cpp). embed: the first stage's embedding of this rank's token rows.
// stage_forward: this stage's blocks from the data-parallel layout of `ap` back to it (timed
// per block into `times`; `probes` sets the backward timing probes). head_loss: the last
// stage's final norm, LM head and summed token cross-entropy over `mean_over`.
// add_backward_times: after a backward, the block times its probes saw.
at::Tensor embed(RankTrainer::State& st, const at::Tensor& tokens);
at::Tensor stage_forward(RankTrainer::State& st, at::Tensor x, const ActivationPlans& ap,
                         bool probes, BlockTimes* times);
at::Tensor head_loss(RankTrainer::State& st, const at::Tensor& x, const at::Tensor& targets,
                     double mean_over);
void reset_backward_probes(RankTrainer::State& st);
void add_backward_times(RankTrainer::State& st, BlockTimes* times);

// Forward (and backward when `train`) of one iteration's `micro_batches` micro-batches through
// this rank's pipeline stage (pipeline.cpp: GPipe or 1F1B as the plan says, activations and
// their gradients sent between neighbouring stages; the caller has checked the batch).
// Returns this rank's share of the loss as run_model does (0 on every stage but the last).
at::Tensor run_pipeline(RankTrainer::State& st, const at::Tensor& tokens,
                        const at::Tensor& targets, int micro_batches, bool train,
                        BlockTimes* times, double mean_over);

// Forward (and backward when `train`) of one batch (or micro-batch) over the rank's shards;
// `rows`: its rows per share group (batch_rows / micro_batch_rows, micro_batches.h).
// Returns this rank's share of the loss, detached, float64 [1]: its rows' summed token
// cross-entropy divided by `mean_over` (the tokens of the whole iteration's batch, so that
// the gradients of m micro-batches add up to the batch's); the shares of all ranks sum to the
// loss (global_loss). `times` (optional, sized by the caller) gets each block's seconds added.
at::Tensor run_model(RankTrainer::State& st, const at::Tensor& tokens, const at::Tensor& targets,
                     bool train, BlockTimes* times, double mean_over, const BatchRows& rows);
// Collective over the active ranks: the sum of their `share`s.
double global_loss(RankTrainer::State& st, const at::Tensor& share);

// Wall clock in seconds; on a CUDA device after the kernels queued so far have finished, so
// that differences of two readings cover the GPU work in between.
double now_s(const c10::Device& device);

}  // namespace shardgym::live
