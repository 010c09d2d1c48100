// RankTrainer: one rank's share of a tensor-parallel GPT training run, and the way to move it
// to another partitioning between two iterations.
//
// Every rank of a CommWorld constructs a RankTrainer with the same model, plan and options and
// then calls the same methods in the same order (SPMD); each call that communicates says so.
//
// What a rank holds (runtime/core/placement.h has the exact boxes):
//   - each block as its strategy places it: dp (replicated), tp1d(t) with P/t replicas,
//     tp1d(sp=1), tp2d(d1,d2,first); chunks and recompute change execution, not placement;
//   - embedding (wte, wpe), final LayerNorm and LM head: data parallel, replicated on every rank,
//     batch split P ways (rank q takes rows [q·G/P, (q+1)·G/P) of the global batch). They stay
//     outside the action space: their cost does not depend on the plan.
//   - with p pipeline stages (pipeline.cpp), each block on its stage's P/p ranks only (its
//     strategy over those ranks), the embedding on the first stage's, the final norm and LM
//     head on the last stage's (a tied wte on both), each stage's batch split P/p ways.
// Batch convention (runtime/core/cost.h): the GLOBAL batch [G, S] is handed to every rank; each
// block takes its replica's rows; between blocks whose layouts differ the residual stream is
// redistributed (forward, and the inverse in backward). The loss is the mean token
// cross-entropy over the global batch, so gradients equal those of the single-rank reference
// (reference_gpt.h): gradients of replicated shards are summed over the ranks that computed
// different rows (the replicas; with sp=1 also the tensor group) — no extra scaling.
// With m micro-batches (micro_batches.h) each micro-batch of G/m rows follows the same
// convention and every row stays with the replica that computes it without micro-batches.
// AdamW (adamw.h) runs on the local shards with global-norm clipping, each replicated element
// counted once in the norm.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"
#include "runtime/live/comm/comm.h"

namespace shardgym::live {

struct TrainerOptions {
  uint64_t seed = 0;                       // initial weights (gpt_params.h)
  at::ScalarType dtype = at::kFloat;       // kFloat or kDouble
  // Where this rank's parameters, optimizer state and activations live: the CPU, or one CUDA
  // device (cuda:LOCAL_RANK with NCCL). Batches may be handed over on the CPU; they are moved.
  // Weights are drawn on the CPU from `seed` and then moved, so every device starts alike.
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  double lr = 1e-3, weight_decay = 0.1, clip = 1.0;  // clip ≤ 0: no clipping
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int threads = 0;                         // intra-op threads; 0 leaves LibTorch's setting
  bool overlap_chunks = true;  // chunks=k: overlap each chunk's all-reduces (tp_block.h)
};

// Per block, the same split as Measurement (runtime/core/measurement.h): fwd_s and bwd_s are
// compute — wall clock of the block's forward (its input redistribution included) and of its
// share of the backward (recomputation and gradient all-reduce included) minus the time spent
// waiting in collectives and point-to-point transfers; comm_s is that waiting time, forward
// and backward. fwd_s + bwd_s + comm_s is the block's whole wall clock on this rank.
// optimizer_s: wall clock of train_step's optimizer step (global-norm clipping, its
// all-reduce, AdamW on every local shard); 0 from forward_backward alone.
struct BlockTimes {
  std::vector<double> fwd_s, bwd_s, comm_s;
  double optimizer_s = 0;
  double stretch_s = 0;  // idled as an emulated straggler (set_compute_stretch), not in fwd/bwd
};

struct RepartitionStats {
  double bytes_received = 0;  // this rank: parameter + exp_avg + exp_avg_sq elements received
  double seconds = 0;         // wall clock of the repartition on this rank
  int blocks_changed = 0;
};

class RankTrainer {
 public:
  // Collective (creates the plan's groups). Throws std::invalid_argument for a plan that does
  // not fit the model or world (why_live_plan_invalid: shapes over the whole batch; 1F1B or
  // GPipe stages) or an unsupported dtype.
  RankTrainer(const ModelSpec& model, const Plan& plan, CommWorld& world, TrainerOptions options);
  ~RankTrainer();
  RankTrainer(const RankTrainer&) = delete;
  RankTrainer& operator=(const RankTrainer&) = delete;

  // Collective. tokens, targets: int64 [G, model.seq] global batch, the same on every rank; G must be
  // a multiple of P and of every block's replicas × chunks. Returns the global mean loss
  // before the update. `times` (optional) gets one entry per block, summed over micro-batches.
  // micro_batches = m runs the batch as m micro-batches with gradient accumulation
  // (micro_batches.h): the same loss and gradients, one gradient sync and one update; an m
  // that does not divide a local batch throws std::invalid_argument (on every rank, before
  // any collective). With pipeline stages the m micro-batches go through the plan's schedule
  // (pipeline.cpp).
  double train_step(const at::Tensor& tokens, const at::Tensor& targets,
                    BlockTimes* times = nullptr, int micro_batches = 1);
  // The first half of train_step: forward, backward and gradient synchronisation, no update;
  // gather_full_grads() then returns these gradients (train_step leaves them too, unclipped).
  double forward_backward(const at::Tensor& tokens, const at::Tensor& targets,
                          BlockTimes* times = nullptr, int micro_batches = 1);
  // Local. An emulated straggler (a scenario's `straggler` event on live ranks, docs/design.md
  // §11): from the next forward_backward on, this rank's forward and backward compute take
  // `factor` times as long, as on a GPU at 1/factor of its speed. The rank idles (factor − 1)
  // times its compute (wall clock minus collective waits) before its gradient synchronisation,
  // and its block times are scaled by `factor`. 1 (the default) stretches nothing; factor must
  // lie in [1, 100].
  void set_compute_stretch(double factor);
  // The second half: global-norm clipping and AdamW on every local shard (collective).
  void optimizer_step();
  // Collective. Global mean loss without gradients.
  double eval_loss(const at::Tensor& tokens, const at::Tensor& targets);

  // Collective. Moves every block whose strategy changes, with its AdamW state; see
  // repartition.cpp. Training then continues with the same mathematics.
  RepartitionStats repartition(const Plan& next);

  // Collective. Full (unpartitioned) tensors by reference-GPT name, on every rank (on the
  // trainer's device).
  std::map<std::string, at::Tensor> gather_full_params();
  std::map<std::string, at::Tensor> gather_full_grads();
  // which: "exp_avg" or "exp_avg_sq".
  std::map<std::string, at::Tensor> gather_full_optimizer_state(const std::string& which);
  // Local: takes this rank's boxes of full tensors (the same map on every rank, any device);
  // resets AdamW.
  void load_full_params(const std::map<std::string, at::Tensor>& full);

  // This rank's shards by name (views of the live parameters; for tests and meters).
  std::map<std::string, at::Tensor> local_params() const;
  int64_t local_param_elements() const;
  int64_t optimizer_step_count() const;
  const Plan& plan() const;
  int rank() const;
  int world_size() const;

  struct State;  // rank_state.h

 private:
  std::unique_ptr<State> state_;
};

}  // namespace shardgym::live
