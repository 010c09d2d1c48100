// Closed-form quantities shared by the simulator and the live run (docs/design.md §3–§4):
// who talks to whom, how many elements each collective carries, FLOPs, parameter and
// activation memory. Everything is per rank, per micro-batch, for one block.
//
// Batch convention: an iteration processes `global_batch` sequences over the world. A block of
// degree t has P/t replicas, so each of its tensor-parallel groups sees b = G·t/P sequences
// (`local_batch`), split into `chunks` pieces when chunked overlap is on.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"

namespace shardgym {

enum class CollOp { kAllReduce, kAllGather, kReduceScatter };
// Which rank group a collective runs over.
//   kTensor: the t ranks of a tp1d group; kMeshD1 / kMeshD2: the tp2d axes carrying the d1 / d2
//   collectives (physical placement depends on first=row|col); kData: the P/t replicas;
//   kContext: the c replicas that split each sequence (plan.h `@cp(c)`).
enum class CommAxis { kTensor, kMeshD1, kMeshD2, kData, kContext };
constexpr int kCommAxes = 5;

const char* coll_op_name(CollOp op);
const char* comm_axis_name(CommAxis axis);

struct Collective {
  CollOp op;
  CommAxis axis;
  int group_size;   // ranks in the group
  double elements;  // X: the full tensor (all-reduce in/out, all-gather out, reduce-scatter in)
  bool forward;     // forward pass (false: backward)
  const char* what; // "attn.out fwd g", for breakdowns
  // Backward collective of the input gradient of a column-parallel GEMM, which Megatron-LM
  // launches asynchronously and overlaps with that GEMM's weight-gradient GEMM
  // (LinearWithGradAccumulationAndAsyncCommunication, core/tensor_parallel/layers.py).
  bool under_wgrad = false;
  // Elements each rank sends with a ring algorithm: 2(p−1)/p·X or (p−1)/p·X.
  double elements_sent_per_rank() const;
};

int effective_global_batch(const ModelSpec& m, int world);
// Sequences processed by one tensor-parallel group of this strategy per iteration.
int local_batch(const ModelSpec& m, const Strategy& s, int world);

// Tensor-parallel collectives of one block for one iteration (fwd + bwd, all chunks).
std::vector<Collective> block_collectives(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                          int world);
// Data-parallel gradient all-reduce of one block per iteration (empty with one replica).
std::vector<Collective> block_grad_sync(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                        int world);
// Context parallelism's exchange in one attention block for one micro-batch (m.context_parallel
// = c > 1, the model of plan.h context_model; empty otherwise). Megatron-Core passes each rank's
// keys and values around a ring of the c ranks, c − 1 steps, each under the attention of the
// chunk it has (TE's AttnFuncWithCPAndKVP2P); the backward passes them again with their
// gradients. In volume that is an all-gather of K and V forward, and an all-gather and a
// reduce-scatter backward (a full recomputation replays the forward's).
std::vector<Collective> block_context_collectives(const ModelSpec& m, BlockKind kind,
                                                  const Strategy& s, int world);
// Sum over block_collectives of elements_sent_per_rank.
double block_comm_elements_per_rank(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                    int world);

// Forward FLOPs of one block on `sequences` sequences (whole block, not per rank), as the
// hardware runs them: with flash attention QKᵀ and ·V skip the masked (causal) half.
double block_forward_flops(const ModelSpec& m, BlockKind kind, double sequences);
// Of those, the attention core (QKᵀ and ·V); 0 for an MLP block.
double attention_core_flops(const ModelSpec& m, BlockKind kind, double sequences);
// Per-rank FLOPs of one iteration: fwd + bwd (2× fwd) + recompute (full: 1× fwd; selective:
// the attention core) divided by degree. Flash attention's backward recomputes QKᵀ: its core
// backward is 2.5× the forward (5 GEMMs against 2; Dao 2023, FlashAttention-2, §3.1.2).
// `pos`: the rank's position in its tensor group, which matters for an uneven tp1d strategy
// (strategy.h heads=): its head-split work scales by s.part(pos). pos < 0: the fullest rank.
double block_rank_flops(const ModelSpec& m, BlockKind kind, const Strategy& s, int world,
                        int pos = -1);
// s.part(pos), or s.max_part() for pos < 0.
double head_part(const Strategy& s, int pos);

// Bytes that the memory-bound kernels of one block move per rank in one pass (forward or
// backward; backward moves twice the forward's): LayerNorm, bias + dropout + residual add,
// GeLU, and without flash attention the scale-mask-softmax and attention dropout over the
// a·s² scores. Counted per element read or written (Korthikanti et al. 2022, §4.1 lists the
// same tensors); fused kernels of Megatron-Core (bias-GeLU, bias-dropout-add) counted once.
double block_memory_bound_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                int world, int pos = -1);
// Whether Megatron-LM runs this block's scale-mask-softmax unfused: with 16-bit scores its
// fused kernel takes them only where FusedScaleMaskSoftmax.is_kernel_available says so
// (megatron/core/fusions/fused_softmax.py, causal mask): 16 < s ≤ 4096, s a multiple of 4, and
// the rank's b·(heads on the rank) a multiple of 4 and of the kernel's batches per block
// (get_batch_per_block of the CUDA kernel: 128 threads, a warp per row of ≤ 32·2^k elements,
// two rows per warp up to 128). Elsewhere PyTorch runs it in fp32 (forward_torch_softmax: cast,
// scale, mask, softmax, cast back; the same backwards): four more kernels each way, more
// bytes, and the softmax output kept in fp32. False with flash attention (no separate
// softmax) and for fp32 models (the live runtime's own attention, one softmax).
bool softmax_unfused(const ModelSpec& m, const Strategy& s, int world, int pos = -1);
// Of those, what selective recomputation replays (softmax and dropout over the scores).
double attention_score_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s, int world,
                             int pos = -1);

// Parameters held by one rank for this block.
double block_rank_params(const ModelSpec& m, BlockKind kind, const Strategy& s, int pos = -1);
// Korthikanti et al. 2022, Table 2, in bytes, scaled from 16-bit activations to m.dtype.
// `prev_recomputes`: for an MLP block, whether the same layer's attention block recomputes
// too (then the layer stores only its input, as in full-layer recomputation).
double block_activation_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s, int world,
                              bool prev_recomputes, int pos = -1);
// Per layer, both blocks with the given strategies (the four cases of the paper).
double layer_activation_bytes(const ModelSpec& m, const Strategy& attn, const Strategy& mlp,
                              int world);

// Rank groups. Ranks of the same tp group are consecutive: group g = [g·t, (g+1)·t).
// Returns the sorted ranks that share `axis` with `rank`. kContext takes its size `context`
// (c): the c consecutive replicas r + k·t of rank r's block of c (Megatron's tp-cp-dp order).
std::vector<int> comm_group(const Strategy& s, CommAxis axis, int rank, int world,
                            int context = 1);

}  // namespace shardgym
