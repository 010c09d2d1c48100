// Plan: one Strategy per block (2·layers blocks), and the pipeline they run in.
//
// Text forms (configs, CLI `--plan`, traces):
//   uniform:tp1d(t=8)                 every block the same
//   tp1d(t=8);tp2d(d1=2,d2=4,first=row);...   exactly num_blocks entries, ';'-separated
//   24*tp1d(t=8);24*dp                 `K*S` repeats S K times (counts must add up)
//   attn=tp1d(t=8)|mlp=tp2d(d1=2,d2=4,first=col)   every attention / every MLP block
// each optionally followed by the pipeline part:
//   ...@pp(p=4,m=16)                  4 stages, 16 micro-batches per iteration, 1F1B, even split
//   ...@pp(p=4,m=16,schedule=interleaved,v=3)   interleaved 1F1B with 3 virtual stages per rank
//   ...@pp(p=2,m=8,split=13/11)       uneven split: 13 layers on stage 0, 11 on stage 1
//   ...@pp(m=4)                       no pipeline, 4 micro-batches (gradient accumulation)
//   ...@dp(w=4/5/5/2)                 uneven data-parallel shares of 4 share groups
//                                     (data_shares.h); after or before the pipeline part
//   ...@cp(2)                         context parallelism: every sequence split over 2 ranks
//                                     (Megatron-Core's --context-parallel-size; below)
// Without `@pp(...)` the plan has one stage and m = 0: "derive m from model.micro_batch"
// (resolve_plan does, see experiment_spec.h). docs/design.md §3–§4.
//
// Stage s holds ranks [s·P/p, (s+1)·P/p) (Megatron's order: tensor fastest, then context, data,
// pipeline outermost) and layers [first_layer(s), first_layer(s+1)); a block's strategy acts
// within its stage's P/p ranks. With `@cp(c)` every c consecutive replicas of a block (ranks
// r + k·t) split each sequence into c parts instead of taking sequences of their own: they
// exchange keys and values around a ring in attention and reduce gradients with the data
// replicas (docs/design.md §3, "Context parallelism"). A micro-batch is G/m sequences over a stage: a block of degree t runs
// (G/m)·t/(P/p) of them on each of its tensor-parallel groups.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"

namespace shardgym {

enum class Schedule { kGPipe, k1F1B, kInterleaved };
const char* schedule_name(Schedule s);

struct Pipeline {
  int stages = 1;               // p
  int micro_batches = 0;        // m per iteration; 0 = derive from model.micro_batch
  Schedule schedule = Schedule::k1F1B;
  int virtual_stages = 1;       // v model chunks per rank (interleaved only)
  std::vector<int> split;       // layers per stage; empty = even (remainder to the last stages)
  // Weights of the data-parallel share groups (data_shares.h; text `@dp(w=...)`); empty =
  // even. Kept here, beside the split, because it is the other plan-level part that actions
  // on blocks keep: whatever carries a plan's pipeline carries its shares.
  std::vector<int> shares;
  // c of `@cp(c)`: ranks over which each sequence is split (1: none). Kept here for the same
  // reason as the shares: actions on blocks keep it.
  int context = 1;

  // One stage, m ≤ 1 (derived or one): no `@pp(...)` part (the shares are printed apart).
  bool is_default() const;
  // Layers held by each stage (the explicit split, or the even one).
  std::vector<int> layers_per_stage(int layers) const;
  std::string to_string() const;  // "pp(p=4,m=16,...)"; options in a fixed order; no shares
  // This pipeline with the boundary between stages i and i+1 moved by `delta` layers (< 0:
  // earlier, stage i hands its last layers to stage i+1), for a model of `layers` layers. The
  // split is left empty when the result is the even one, so a move and its reverse give back
  // an equal pipeline. A stage may end up with no layer: validate() says so.
  Pipeline moved(int boundary, int delta, int layers) const;
  static Pipeline parse(const std::string& text);  // throws std::invalid_argument
  bool operator==(const Pipeline& o) const;
};

struct Plan {
  std::vector<Strategy> blocks;
  Pipeline pipeline;

  int size() const { return static_cast<int>(blocks.size()); }
  int stages() const { return pipeline.stages; }
  // Ranks in each pipeline stage: world / stages.
  int stage_world(int world) const { return world / pipeline.stages; }
  // Stage of every block (2 blocks per layer), from the pipeline's split.
  std::vector<int> block_stages() const;
  // Shortest text form that parses back to this plan.
  std::string to_string() const;
  // Throws std::invalid_argument (wrong count, bad strategy: says which entry).
  static Plan parse(const std::string& text, int num_blocks);
  static Plan uniform(const Strategy& s, int num_blocks);

  // Empty when the pipeline fits the model and world and every block is shape-valid within
  // its stage for one micro-batch, else the first problem. An m of 0 is checked as derived.
  std::string validate(const ModelSpec& model, int world) const;
  // The plan-level parts alone (pipeline, context parallelism, micro-batches, data shares):
  // validate() without the per-block checks. Messages start "pipeline", "@cp(", "data
  // shares" or name the micro-batch split.
  std::string parts_invalid_reason(const ModelSpec& model, int world) const;

  bool operator==(const Plan& o) const { return blocks == o.blocks && pipeline == o.pipeline; }
  bool operator!=(const Plan& o) const { return !(*this == o); }
};

// Micro-batches per iteration of `plan`: its explicit m (`@pp(m=..)`), else, with the model's
// global_batch given, Megatron-LM's rule for every plan, pipelined or not: m = G /
// (micro_batch · DP), DP = (P/p) / the plan's lowest block degree (its largest data-parallel
// degree); 1 where a replica's share is at most one micro-batch. Without global_batch: 1, or
// with a pipeline part the plan's largest degree (micro_batch per replica of it, as before).
int plan_micro_batches(const Plan& plan, const ModelSpec& model, int world);
// Why the derived m does not exist ("" if it does or m is explicit): a replica's share of the
// global batch is more than one micro-batch but not a whole number of them. validate() says so.
std::string micro_batch_split_reason(const Plan& plan, const ModelSpec& model, int world);
// The model as one micro-batch sees it: global_batch = G/m (G of `world` ranks). With the
// stage's world P/p, every per-block formula of cost.h then gives per-micro-batch quantities.
ModelSpec micro_batch_model(const ModelSpec& model, int micro_batches, int world);
// The model as a context-parallel plan prices it (`@cp(c)`, c > 1): each sequence is c parts of
// seq/c tokens, G·c parts in the global batch, and context_parallel = c (the attention core of
// a part runs over the whole sequence's keys: cost.h). With that model every per-block formula
// counts a rank's tokens, and m is Megatron-LM's (DP = replicas / c). c = 1: the model itself.
ModelSpec context_model(const ModelSpec& model, int context, int world);
// Why `@cp(c)` cannot run this model and plan ("" if it can): Megatron-Core's context
// parallelism needs flash attention (Transformer Engine's attention), a sequence of 2·c
// load-balanced chunks, a global batch given, and c dividing every block's replicas.
std::string context_invalid_reason(const Plan& plan, const ModelSpec& model, int world);

}  // namespace shardgym
