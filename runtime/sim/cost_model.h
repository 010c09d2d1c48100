// CostModel: the simulator's noise-free cost of one block under one strategy, given the
// cluster as it is now (link bandwidth factors, stragglers, current seq length and batch).
// SimRun caches what this computes; CostReport prints it. docs/design.md §4.
//
// Compute: FLOPs (cost.h block_rank_flops) over each rank's device at the efficiency its
//   GEMM shapes reach (calibration.h roofline), times the rank's straggler factor; a block
//   takes as long as its slowest rank (heterogeneous groups run at their slowest member).
// Communication: every collective of cost.h (tensor-parallel and data-parallel gradient
//   sync) over every group of the world (collective_model.h); the slowest group counts.
//   Chunked overlap with k chunks: per pass, compute T and communication C split in k
//   pieces; communication of chunk i overlaps compute of chunk i+1, so the pass takes
//   T/k + (k−1)·max(T, C)/k + C/k and the exposed communication is
//       exposed = C/k + (k−1)/k · max(0, C − T)        (k = 1: exposed = C).
//   Each chunk's collective pays its own α (cost.h lists one collective per chunk).
//   Gradient sync is not overlapped.
//   With `tp_comm_overlap` a tp1d block's collectives are split into t pieces under its GEMMs
//   (Megatron-Core / Transformer Engine ring exchange): the same formula with k = max(chunks, t).
// Memory-bound kernels (cost.h block_memory_bound_bytes) take their bytes over the device's
//   memory bandwidth × memory_efficiency; flash attention runs at attention_efficiency of peak;
//   GEMMs at the calibration table's shape efficiency × the device's gemm_efficiency / 0.80
//   (the builtin table tops out at 0.80), or, on a device with a measured GEMM fixed time,
//   each kernel at that time plus its roofline at gemm_efficiency (calibration.h gemm_time).
// Everything above is per micro-batch: the model it is given is micro_batch_model() and the
//   world is one pipeline stage's (SimRun). Gradient reduction and the optimizer step are per
//   iteration: grad_sync_s (all-reduce, or reduce-scatter with the distributed optimizer, of
//   the block's gradients in grad_bytes()), param_gather_s (its all-gather of parameters) and
//   optimizer_s (AdamW reading and writing its state once: grad + 24 B + param per parameter,
//   over the replicas sharing it); SimRun overlaps them as the training flags say.
// With a live calibration (ClusterSpec::calibration) whose table has the block's strategy for
//   this model: fwd_s, bwd_s and comm_s are the measured ones (comm: every wait of the block,
//   its data-parallel gradient reduction included, so grad_sync_s = 0), the optimizer step is
//   the fitted seconds per parameter, and head_cost's compute_s is the fitted per-step
//   overhead. Compute times still scale with the slowest rank's slowdown.
// Memory per rank: state_bytes_per_param(dp) × the rank's parameter elements (core/placement.h
// rank_param_elements: its boxes) + block_activation_bytes.
// Uneven data shares (Conditions::work, core/data_shares.h): a rank's compute and its
//   memory-bound traffic scale with its share (linearly: the GEMMs keep the even shape's
//   efficiency, which a group with a smaller share slightly overstates); tensor-parallel
//   messages and activations are those of the largest share (the slowest group and the fullest
//   rank count); a group with no share holds no state and leaves the data-parallel groups, so
//   gradient reduction runs over the remaining replicas and the distributed optimizer shards
//   over them.
// Energy above idle: Σ_ranks (busy_w − idle_w)·compute time, plus bytes × energy_per_byte.
//
// Length: every cost term is stated where it is declared; docs/design.md §4 derives them.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"
#include "runtime/sim/calibration.h"
#include "runtime/sim/collective_model.h"
#include "runtime/sim/layout.h"

namespace shardgym {

// The key of a calibration's block table (RuntimeCalibration::model_signature): the shapes
// and options of the micro-batch model that decide a block's time, and the world size.
std::string calibration_signature(const ModelSpec& micro_batch_model, int world);
// Tokens a rank runs through the LM head in one micro-batch of the table's plans (their
// data-parallel head: batch / world sequences of seq tokens); 0 where the signature lacks them.
double calibration_tokens_per_rank(const std::string& signature);

// The cluster's state at one env step.
struct Conditions {
  ModelSpec model;                  // seq and global_batch as the scenario has them now
  std::vector<double> link_factor;  // per ClusterSpec::links entry (nominal, noise-free)
  std::vector<double> slowdown;     // per rank, 1 = nominal speed
  // Per rank: its data share over the even one (data_shares.h share_work; 0 = excluded);
  // empty = 1 for every rank.
  std::vector<double> work;
};

struct CollectiveCost {
  Collective collective;
  double bytes_per_rank = 0;  // sent by each rank (ring)
  double time_s = 0;          // slowest group
};

// Which of the terms added with pipeline parallelism are on (tests turn them off to compare
// with the model before them).
struct CostTerms {
  bool memory_bound = true;  // memory-bound kernels and the optimizer step
};

struct BlockCost {
  double flops_per_rank = 0;
  double fwd_s = 0, bwd_s = 0;                  // compute of the slowest rank (+ memory-bound)
  double tp_comm_fwd_s = 0, tp_comm_bwd_s = 0;  // Σ collective times per pass, all chunks
  double grad_sync_s = 0;                       // per iteration (not in comm_s)
  double param_gather_s = 0;                    // per iteration, distributed optimizer only
  double optimizer_s = 0;                       // per iteration
  double tp_comm_bwd_hidden_s = 0;              // of tp_comm_bwd_s, hidden under the wgrad GEMM
  double host_s = 0;  // per micro-batch: the host's time to issue its kernels (block_kernels)
  double comm_s = 0;  // exposed TP communication, after overlap
  double comm_bytes_per_rank = 0;  // tensor-parallel + grad sync, sent per rank
  double busy_energy_j = 0;        // Σ_ranks (busy_w − idle_w)·compute time
  double link_energy_j = 0;        // all ranks' bytes × energy_per_byte
  double params_per_rank = 0;
  double state_bytes = 0;                      // params + grads + optimizer state, per rank
  double activation_bytes = 0;                 // per rank (MLP: its attention does not recompute)
  double activation_bytes_prev_recompute = 0;  // MLP whose attention recomputes
  std::vector<CollectiveCost> collectives;     // filled only with `detail`
};

// Plan-independent part of an iteration: embedding + LM head (data-parallel over the world).
struct HeadCost {
  double compute_s = 0;    // LM head GEMM fwd + bwd + cross-entropy, slowest rank, per micro-batch
  double grad_sync_s = 0;  // all-reduce of the embedding + head gradients over the world
  double busy_energy_j = 0;
  double link_energy_j = 0;
  double memory_bytes = 0;     // per rank: state + embedding output + fp32 logits
  double idle_power_w = 0;     // Σ_ranks idle_w
  double memory_capacity = 0;  // smallest device memory
  double host_s = 0;           // per micro-batch: the host's time to issue the embedding and head
  double loop_host_s = 0;      // per micro-batch and stage: the framework's own work
  // Per iteration: the calibration's per-step overhead where the table does not hold the
  // micro-batch (it was fitted per step, RuntimeCalibration::step_overhead_s, less the head
  // of the table's shape it holds; a measured head carries it in compute_s instead).
  double iteration_s = 0;
};

// Kernels and collectives one micro-batch of a block issues from the host (forward, backward,
// and the forward again under full recomputation), as Megatron-LM's unfused GPT layer runs
// them (docs/design.md §4, "Host issue"); `collectives`: how many block_collectives lists;
// `unfused_softmax`: the scale-mask-softmax runs as PyTorch's five kernels each way, not one
// (cost.h softmax_unfused).
int block_kernels(const ModelSpec& m, BlockKind kind, const Strategy& s, int collectives,
                  bool unfused_softmax = false);
// The embedding, final LayerNorm, LM head and unfused cross-entropy, forward and backward.
constexpr int kHeadKernels = 19;

class CostModel {
 public:
  CostModel(const ClusterSpec& cluster, Calibration calibration, CostTerms terms = {});

  // Installs new conditions (recomputes the link state). Throws std::invalid_argument if
  // the vectors do not match the cluster.
  void set_conditions(const Conditions& c);
  const Conditions& conditions() const { return cond_; }
  const ModelSpec& model() const { return cond_.model; }
  const ClusterSpec& cluster() const { return cluster_; }
  const LinkState& links() const { return links_; }
  const Calibration& calibration() const { return calib_; }
  int world() const { return world_; }
  // A micro-batch's time from its GPU time and its host's issue time (docs/design.md §4, "Host
  // issue"): (gpu^q + host^q)^(1/q) with the hosts' DeviceType::host_overlap_exponent q;
  // max(gpu, host) where no device states one, the sum on serial CPU ranks (q = 1).
  double with_host(double gpu_s, double host_s) const;

  BlockCost block_cost(BlockKind kind, const Strategy& s, bool detail = false) const;
  // The memory fields of block_cost alone (params_per_rank, state_bytes, the activation bytes),
  // without its times: what a memory-fit check needs. block_cost takes them from here.
  struct BlockMemory {
    int dp = 1;  // replicas with a share, which the distributed optimizer divides the state by
    double params_per_rank = 0, state_bytes = 0, activation_bytes = 0;
    double activation_bytes_prev_recompute = 0;
  };
  BlockMemory block_memory(BlockKind kind, const Strategy& s) const;
  HeadCost head_cost() const;
  // Activations from one block's layout to the next's: forward + backward (gradients back).
  TransferCost redistribution(const Strategy& from, const Strategy& to) const;
  // Params + optimizer state (not gradients) of one block moving between strategies.
  TransferCost repartition(BlockKind kind, const Strategy& from, const Strategy& to) const;
  // Bytes per parameter that a repartition moves: state_bytes_per_param − gradient bytes.
  double moved_bytes_per_param() const;

  // Per-rank GEMMs of one block's forward pass (all chunks), for the roofline.
  // `pos`: the rank's position in its tensor group (uneven tp1d; < 0: the fullest rank).
  static std::vector<Gemm> block_gemms(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                       int world, int pos = -1);

 private:
  // Compute time of `flops` whose GEMMs are `gemms`, per rank (slowdown applied), and the
  // energy above idle that it burns.
  // The GEMMs' time on `dev` (calibration.h gemm_time): its fixed time and gemm_efficiency
  // where it states one, else the calibration table (`scaled`: × gemm_efficiency / 0.80).
  double gemms_on(const DeviceType& dev, const std::vector<Gemm>& gemms, const std::string& kind,
                  bool scaled = true) const;
  void compute_times(const std::vector<Gemm>& gemms, double flops, const std::string& kind,
                     double& slowest_s, double& busy_j) const;
  // The LM head over n tokens a rank: its GEMM forward and backward and (memory-bound terms)
  // the cross-entropy over its logits, on the slowest rank; `conditioned`: with the
  // conditions' slowdowns and data shares, else every rank at its device's speed.
  double head_compute(double n, bool conditioned, double& busy_j) const;
  // Seconds of one pass of a block on the slowest rank: dense GEMMs, the attention core and
  // `mem` bytes of memory-bound traffic, each weighted (fwd = 1, bwd = 2, ...). `by_pos` holds
  // one shape for every rank, or (uneven tp1d) one per position in the tensor group: rank r
  // runs by_pos[r mod t].
  struct PassWork {
    double dense = 0, core = 0, mem = 0;
  };
  struct PassShape {
    std::vector<Gemm> dense, core;
    double core_flops = 0, mem = 0;
  };
  double slowest_pass(const std::vector<PassShape>& by_pos, const std::string& kind,
                      const PassWork& w, double& busy_j) const;
  // block_cost's parts (cost_model.cpp): the passes' shapes, their times (returns the
  // backward's weights), the context-parallel ring, the data-parallel terms, a measured row.
  std::vector<PassShape> pass_shapes(BlockKind kind, const Strategy& s) const;
  PassWork compute_passes(BlockKind kind, const Strategy& s, const std::vector<PassShape>& pass,
                          BlockCost& out) const;
  void add_context_ring(BlockKind kind, const Strategy& s, const std::vector<PassShape>& pass,
                        double core_bwd, BlockCost& out, std::vector<CollectiveCost>* list) const;
  void add_data_parallel(BlockKind kind, const Strategy& s, const BlockMemory& memory,
                         BlockCost& out, std::vector<CollectiveCost>* list) const;
  void apply_measured_row(BlockKind kind, const Strategy& s, double params, int pieces,
                          BlockCost& out) const;
  double work(int r) const { return cond_.work.empty() ? 1.0 : cond_.work[r]; }
  // The groups of `axis` (as group_shapes) without the excluded ranks.
  std::vector<GroupShape> active_group_shapes(const Strategy& s, CommAxis axis,
                                              int context = 1) const;
  double collectives_time(const std::vector<Collective>& cs, const Strategy& s, bool forward,
                          double& bytes_per_rank, double& energy_j,
                          std::vector<CollectiveCost>* detail, double* under_wgrad = nullptr) const;

  ClusterSpec cluster_;
  Calibration calib_;
  CostTerms terms_;
  int world_ = 0;
  Conditions cond_;
  LinkState links_;
  std::vector<int> rank_device_;  // device index of each rank
  double max_work_ = 1;           // the largest data share (Conditions::work)
  // The slowest host's (DeviceType): per kernel, per collective, per micro-batch.
  double host_kernel_s_ = 0, host_collective_s_ = 0, host_micro_batch_s_ = 0;
  // The smallest stated DeviceType::host_overlap_exponent; none stated: ∞, i.e. max(G, H).
  double host_overlap_ = std::numeric_limits<double>::infinity();
  int active_ranks_ = 0;  // ranks with a share
};

}  // namespace shardgym
