#include "runtime/core/model_spec.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace shardgym {

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
  }
  return 4;
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
  }
  return "float32";
}

DType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "fp32") return DType::kFloat32;
  if (name == "float16" || name == "fp16") return DType::kFloat16;
  if (name == "bfloat16" || name == "bf16") return DType::kBFloat16;
  if (name == "float64" || name == "fp64") return DType::kFloat64;
  throw std::invalid_argument("unknown dtype '" + name +
                              "' (expected float32, float16, bfloat16 or float64)");
}

const char* block_kind_name(BlockKind kind) {
  return kind == BlockKind::kAttention ? "attention" : "mlp";
}

void ModelSpec::set_llama_traits() {
  rmsnorm = swiglu = rotary = true;
  linear_bias = dropout = tied_embeddings = false;
}

std::string ModelSpec::family() const {
  const bool gpt = !rmsnorm && !swiglu && !rotary && linear_bias && kv_head_count() == heads;
  const bool llama = rmsnorm && swiglu && rotary && !linear_bias;
  return gpt ? "GPT" : llama ? "Llama" : "Transformer";
}

int64_t ModelSpec::attention_params() const {
  const int64_t h = hidden, q = qkv_width(), bias = linear_bias ? 1 : 0;
  // norm (2h or h) + QKV (h·q + q) + out (h·h + h); q = 3h without GQA
  return norm_params_per_hidden() * h + h * q + bias * q + h * h + bias * h;
}

int64_t ModelSpec::mlp_params() const {
  const int64_t h = hidden, f = ffn_size(), f1 = fc1_width(), bias = linear_bias ? 1 : 0;
  // norm + fc1 (h·f1 + f1; f1 = 2f for SwiGLU) + fc2 (f·h + h)
  return norm_params_per_hidden() * h + h * f1 + bias * f1 + f * h + bias * h;
}

int64_t ModelSpec::block_params(int block) const {
  return block_kind(block) == BlockKind::kAttention ? attention_params() : mlp_params();
}

int64_t ModelSpec::embedding_params() const {
  const int64_t h = hidden;
  // input embeddings + final norm + LM head
  return input_embedding_params() + norm_params_per_hidden() * h +
         (tied_embeddings ? 0 : int64_t(vocab) * h);
}

int64_t ModelSpec::input_embedding_params() const {
  return int64_t(vocab) * hidden + (rotary ? 0 : full_seq() * hidden);
}

int ModelSpec::grad_bytes() const {
  return mixed_precision && main_grads_fp32 ? 4 : dtype_bytes(dtype);
}

double ModelSpec::optimizer_bytes_per_param() const {
  const double e = dtype_bytes(dtype);
  if (!mixed_precision) return e + 7 * e;  // norm; Adam reads g, w, m, v and writes w, m, v
  double bytes = 0;
  if (!main_grads_fp32) bytes += e + 4;          // model gradient → fp32 main gradient
  if (dtype == DType::kFloat16) bytes += 4 + 4;     // unscale in place, checking for inf / NaN
  bytes += 4;                                    // gradient norm (clipping)
  bytes += 4 * 4 + 3 * 4;                        // Adam on fp32 master weights and moments
  bytes += 4 + e;                                // master weights → model weights
  return bytes;
}

double ModelSpec::state_bytes_per_param(int dp) const {
  // Mixed precision: 2 (param) + grad + 4 (master) + 4 + 4 (moments); else param + grad +
  // exp_avg + exp_avg_sq in dtype. The distributed optimizer divides what the optimizer owns
  // (master weights and moments) by DP (Megatron-LM docs/source/distrib_optimizer.md).
  const double d = distributed_optimizer ? std::max(1, dp) : 1;
  if (mixed_precision) return dtype_bytes(dtype) + grad_bytes() + 12.0 / d;
  return 2.0 * dtype_bytes(dtype) + 2.0 * dtype_bytes(dtype) / d;
}

std::string ModelSpec::validate() const {
  std::ostringstream err;
  if (layers <= 0) err << "layers must be positive (got " << layers << ")";
  else if (hidden <= 0) err << "hidden must be positive (got " << hidden << ")";
  else if (heads <= 0) err << "heads must be positive (got " << heads << ")";
  else if (hidden % heads != 0)
    err << "hidden (" << hidden << ") must be divisible by heads (" << heads << ")";
  else if (kv_heads < 0 || kv_heads > heads || heads % kv_head_count() != 0)
    err << "kv_heads (" << kv_heads << ") must divide heads (" << heads
        << "), or be 0 for as many as heads";
  else if (rotary && head_dim() % 2 != 0)  // RoPE rotates pairs of a head's features
    err << "position: rotary needs an even head dimension (hidden / heads = " << head_dim() << ")";
  else if (ffn < 0) err << "ffn must be positive or 0 for 4·hidden (got " << ffn << ")";
  else if (seq <= 0) err << "seq must be positive (got " << seq << ")";
  else if (micro_batch <= 0) err << "micro_batch must be positive (got " << micro_batch << ")";
  else if (global_batch < 0) err << "global_batch must be ≥ 0 (got " << global_batch << ")";
  else if (vocab <= 0) err << "vocab must be positive (got " << vocab << ")";
  // Sizes far beyond any model trained so far (hidden 25,600 and vocabularies of 256 k at
  // most in the published runs) are refused: products such as 4·hidden are ints.
  else if (hidden > kMaxHidden) err << "hidden " << hidden << " is above the limit " << kMaxHidden;
  else if (ffn > 4 * kMaxHidden) err << "ffn " << ffn << " is above the limit " << 4 * kMaxHidden;
  else if (layers > kMaxLayers) err << "layers " << layers << " is above the limit " << kMaxLayers;
  else if (seq > kMaxTokens) err << "seq " << seq << " is above the limit " << kMaxTokens;
  else if (vocab > kMaxTokens) err << "vocab " << vocab << " is above the limit " << kMaxTokens;
  else if (micro_batch > kMaxTokens || global_batch > kMaxTokens)
    err << "batch " << std::max(micro_batch, global_batch) << " is above the limit " << kMaxTokens;
  return err.str();
}

ModelSpec ModelSpec::gpt(int layers, int hidden, int heads, int seq, int micro_batch,
                         int global_batch) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.seq = seq;
  m.micro_batch = micro_batch;
  m.global_batch = global_batch;
  return m;
}

}  // namespace shardgym
