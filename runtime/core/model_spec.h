// ModelSpec: the shapes of the Transformer being trained, the one thing every layer agrees on.
//
// A model of `layers` Transformer layers has 2·layers *blocks*: block 2i is layer i's
// attention, block 2i+1 its MLP. Strategies are chosen per block (docs/design.md §3).
//
// Two families of blocks (docs/design.md §3 "Model shapes"): GPT's (LayerNorm, learned
// positions, biases, dropout, GeLU MLP of 4·hidden) and Llama's (Touvron et al. 2023; Llama 3,
// arXiv 2407.21783, Table 3): RMSNorm, rotary positions, no biases, no dropout, a SwiGLU MLP
// of its own width `ffn` (three matrices), grouped-query attention with `kv_heads` key/value
// heads, untied embeddings. Each trait is its own field; `arch: llama` sets them together.
#pragma once

#include <cstdint>
#include <string>

namespace shardgym {

enum class DType { kFloat32, kFloat16, kBFloat16, kFloat64 };

int dtype_bytes(DType dtype);
std::string dtype_name(DType dtype);
// Throws std::invalid_argument naming the accepted values.
DType parse_dtype(const std::string& name);

enum class BlockKind { kAttention, kMlp };
const char* block_kind_name(BlockKind kind);

struct ModelSpec {
  std::string name = "gpt";
  int layers = 24;
  int hidden = 2048;
  int heads = 16;
  int kv_heads = 0;  // key/value heads (grouped-query attention); 0 means heads (multi-head)
  int ffn = 0;  // 0 means 4·hidden
  int seq = 2048;
  int micro_batch = 4;
  int global_batch = 0;  // sequences per optimizer step over all ranks; 0 = micro_batch per replica
  int vocab = 50304;
  DType dtype = DType::kBFloat16;
  // Mixed-precision AdamW keeps fp32 master weights + two moments: 16 B/param in total
  // (Korthikanti et al.). Off: params, grads and both moments in `dtype` (4·bytes/param).
  bool mixed_precision = true;
  // Megatron-LM keeps (and data-parallel reduces) gradients in fp32 for bf16 training
  // (arguments.py: bf16 forces accumulate_allreduce_grads_in_fp32): 18 B/param with the above.
  bool main_grads_fp32 = false;
  // How the job runs (docs/design.md §4; Megatron-LM flags in brackets). Off by default.
  bool flash_attention = false;       // fused causal attention: no s² activations, half the
                                      // QKᵀ/·V work, QKᵀ recomputed in its backward
  bool distributed_optimizer = false; // [--use-distributed-optimizer] optimizer state / DP
  bool overlap_grad_reduce = false;   // [--overlap-grad-reduce] DP reduction under backward
  bool overlap_param_gather = false;  // [--overlap-param-gather] its all-gather under forward
  bool tp_comm_overlap = false;       // [--tp-comm-overlap] TP collectives under the GEMMs
  // [--no-overlap-p2p-communication turns it off] the interleaved schedule's stage-to-stage
  // transfers under the chunks' compute: Megatron-LM's default since 2023-10-12 (commit
  // 4eeff55, "Make overlap_p2p_comm the default"; the option came 2023-05-31). GPipe and 1F1B
  // always wait on their transfers (schedules.py).
  bool overlap_p2p_comm = true;
  bool vocab_parallel = false;        // embedding and LM head split over the vocabulary by
                                      // the edge blocks' TP degree (Megatron-LM's layers)
  // The layers as the live ranks run them (runtime/live/tp; config `implementation: live`,
  // set for every config with a live section): the simulator's peak memory is then
  // live_memory.h's, measured structure and all, not Megatron-LM's with fitted scales.
  bool live_layers = false;
  // Block traits (Megatron-LM flags in brackets; the defaults are GPT's, as every config
  // before them was written).
  bool rmsnorm = false;          // [--normalization RMSNorm] one weight per norm, no bias
  bool swiglu = false;           // [--swiglu] fc1 is gate and up (h × 2·ffn), SiLU · up
  bool rotary = false;           // [--position-embedding-type rope] no learned positions
  bool linear_bias = true;       // [--disable-bias-linear turns it off] biases of the GEMMs
  bool dropout = true;           // [--attention-dropout 0 --hidden-dropout 0 turn it off]
  bool tied_embeddings = false;  // LM head shares the token embedding (counted once)
  // Context parallelism [--context-parallel-size], as a plan prices it (plan.h `@cp(c)`):
  // context_model() sets c and then `seq` is one part of a sequence (its tokens / c) and the
  // global batch counts parts; 1 everywhere else. full_seq() is the sequence itself.
  int context_parallel = 1;

  // Upper limits validate() enforces (int products such as 4·hidden stay in range).
  static constexpr int kMaxHidden = 1 << 20;
  static constexpr int kMaxLayers = 1 << 16;
  static constexpr int kMaxTokens = 1 << 24;  // seq, vocab, batches

  int ffn_size() const { return ffn > 0 ? ffn : 4 * hidden; }
  int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t full_seq() const { return int64_t(seq) * context_parallel; }
  int head_dim() const { return hidden / heads; }
  // Output width of the QKV GEMM: h for Q plus 2·kv_heads·head_dim for K and V (3h without GQA).
  int64_t qkv_width() const { return int64_t(hidden) + 2 * int64_t(kv_head_count()) * head_dim(); }
  // Output width of the MLP's first GEMM: ffn, or 2·ffn for SwiGLU's gate and up.
  int64_t fc1_width() const { return int64_t(ffn_size()) * (swiglu ? 2 : 1); }
  // Parameters of one norm over `hidden`: weight and bias, or RMSNorm's weight alone.
  int norm_params_per_hidden() const { return rmsnorm ? 1 : 2; }
  // Sets the Llama traits together (config key `arch: llama`).
  void set_llama_traits();
  // "GPT" with GPT's block traits, "Llama" with Llama's (kv_heads aside), else "Transformer".
  std::string family() const;
  int num_blocks() const { return 2 * layers; }
  static BlockKind block_kind(int block) { return block % 2 == 0 ? BlockKind::kAttention : BlockKind::kMlp; }
  static int block_layer(int block) { return block / 2; }

  // Parameter counts of one block (weights, biases if any, its norm).
  int64_t attention_params() const;
  int64_t mlp_params() const;
  int64_t block_params(int block) const;
  // Embedding (token, and position unless rotary), final norm and LM head (unless tied);
  // kept data-parallel, outside the action space.
  int64_t embedding_params() const;
  // Of those, the input side: the token embedding and (unless rotary) the position table.
  int64_t input_embedding_params() const;
  // Bytes per parameter of params + grads + optimizer state (see mixed_precision), with
  // `dp` data-parallel replicas sharing the optimizer state (distributed_optimizer).
  double state_bytes_per_param(int dp = 1) const;
  // Bytes of one gradient element (as stored and reduced).
  int grad_bytes() const;
  // HBM bytes moved per parameter by one optimizer step on the rank that owns the parameter
  // (the distributed optimizer's shard), in Megatron-LM's order (optimizer/optimizer.py,
  // MixedPrecisionOptimizer.step): copy 16-bit gradients into fp32 main gradients (unless they
  // are kept in fp32), unscale and check for inf/NaN (fp16 loss scaling), the gradient norm
  // for clipping, Adam (read gradient, weight and both moments, write the three), copy the
  // fp32 weights back into the model's. Zeroing the gradient buffer for the next iteration
  // (grad_bytes() on every rank, for every parameter) is not included.
  double optimizer_bytes_per_param() const;

  // Empty string when the shapes are consistent, else what is wrong (hidden % heads,
  // heads % kv_heads, ...).
  std::string validate() const;

  // A GPT of this shape, every other field at its default: the small models of tests and
  // benches in one line (ModelSpec::gpt(2, 64, 4, 32) is 2 layers, hidden 64, 4 heads, seq 32).
  static ModelSpec gpt(int layers, int hidden, int heads, int seq, int micro_batch = 4,
                       int global_batch = 0);
};

}  // namespace shardgym
