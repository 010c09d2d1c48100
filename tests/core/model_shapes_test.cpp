// runtime/core/model_spec.h and cost.h with Llama's blocks (docs/design.md §3 "Model shapes"):
// parameter counts against the published Llama 3 models, FLOPs against the published compute
// of the 405B run, and the memory of grouped-query attention and SwiGLU against hand counts.
#include <gtest/gtest.h>

#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"

namespace shardgym {
namespace {

// Llama 3 (arXiv 2407.21783, Table 3; the released configs: vocabulary 128,256, untied).
ModelSpec llama3(int layers, int hidden, int heads, int ffn) {
  ModelSpec m;
  m.set_llama_traits();
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = 8;
  m.ffn = ffn;
  m.vocab = 128256;
  m.seq = 8192;
  m.global_batch = 1;
  m.flash_attention = true;
  return m;
}

int64_t total_params(const ModelSpec& m) {
  return m.layers * (m.attention_params() + m.mlp_params()) + m.embedding_params();
}

// The released checkpoints' parameter counts (safetensors metadata of the 8B, 70B and 405B
// models: 8,030,261,248, 70,553,706,496 and 405,853,388,800).
TEST(ModelShapes, Llama3ParameterCountsArePublished) {
  EXPECT_EQ(total_params(llama3(32, 4096, 32, 14336)), 8030261248LL);
  EXPECT_EQ(total_params(llama3(80, 8192, 64, 28672)), 70553706496LL);
  EXPECT_EQ(total_params(llama3(126, 16384, 128, 53248)), 405853388800LL);
}

// The GEMMs' forward FLOPs are 2 per weight per token (QKV with 8 K/V heads, SwiGLU's three
// matrices); the attention core is 4·s·h per token over every query head (half with a
// causal fused kernel).
TEST(ModelShapes, LlamaBlockFlopsAreTwicePerWeightPerToken) {
  const ModelSpec m = llama3(32, 4096, 32, 14336);
  const double tokens = m.seq, h = m.hidden;
  const double attn_weights = h * h + 2 * h * 1024 + h * h, mlp_weights = 3 * h * 14336;
  EXPECT_DOUBLE_EQ(block_forward_flops(m, BlockKind::kMlp, 1), 2 * tokens * mlp_weights);
  EXPECT_DOUBLE_EQ(attention_core_flops(m, BlockKind::kAttention, 1), 4 * tokens * tokens * h / 2);
  EXPECT_DOUBLE_EQ(block_forward_flops(m, BlockKind::kAttention, 1) -
                       attention_core_flops(m, BlockKind::kAttention, 1),
                   2 * tokens * attn_weights);
}

// Llama 3 405B was trained with 3.8 × 10^25 FLOPs on 15.6 T tokens (arXiv 2407.21783, §1 and
// §3.2.1), the paper's 6·N·D. Our GEMM FLOPs of one iteration (forward and backward, no
// recomputation), LM head included, over the same tokens give it within 1 %; the attention
// core at sequence 8,192 (flash attention: its backward 2.5× the forward) adds 4.9 % more,
// which 6·N·D leaves out.
TEST(ModelShapes, Llama3405BTrainingComputeIsThePublishedOne) {
  const ModelSpec m = llama3(126, 16384, 128, 53248);
  const Strategy dp = Strategy::dp();
  double gemm = 0, core = 0;  // per sequence of 8,192 tokens, one rank holding it all
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    const double all = block_rank_flops(m, kind, dp, 1);
    const double c = 3.5 * attention_core_flops(m, kind, 1);  // fwd + flash bwd (2.5×)
    gemm += m.layers * (all - c);
    core += m.layers * c;
  }
  gemm += 6.0 * m.seq * m.hidden * m.vocab;  // LM head, forward and backward
  const double sequences = 15.6e12 / m.seq;
  EXPECT_NEAR(gemm * sequences / 3.8e25, 1.0, 0.01);
  EXPECT_NEAR(core / gemm, 0.049, 0.001);
}

// Activations per layer in Korthikanti et al.'s 16-bit units (cost.h): without dropout the
// norm input, GEMM input and residual keep 4·sbh per block; grouped-query attention keeps Q
// (2), K and V (2 each at 8 of 32 heads: 1 in all) and the projection input (2); SwiGLU keeps
// fc1's gate and up and its output (2·f each).
TEST(ModelShapes, GroupedQueryAndSwiGluActivationsAreHandCounted) {
  ModelSpec m = llama3(32, 4096, 32, 14336);
  m.global_batch = 2;
  const double sbh = double(m.seq) * 2 * m.hidden;
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, BlockKind::kAttention, Strategy::dp(), 1, false),
                   (4 + 2 + 1 + 2) * sbh);
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, BlockKind::kMlp, Strategy::dp(), 1, false),
                   4 * sbh + 6 * double(m.seq) * 2 * m.ffn);
  // Tensor parallel over 8: the head-split parts divide, the rest stays whole without sp.
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, BlockKind::kAttention, Strategy::tp1d(8), 8, false),
                   4 * sbh + 5 * sbh / 8);
  // GPT's blocks keep 13·sbh and 21·sbh (f = 4h) as before.
  ModelSpec gpt;
  gpt.flash_attention = true;
  gpt.global_batch = 1;
  const double g = double(gpt.seq) * gpt.hidden;
  EXPECT_DOUBLE_EQ(block_activation_bytes(gpt, BlockKind::kAttention, Strategy::dp(), 1, false),
                   13 * g);
  EXPECT_DOUBLE_EQ(block_activation_bytes(gpt, BlockKind::kMlp, Strategy::dp(), 1, false), 21 * g);
}

TEST(ModelShapes, KvHeadsMustDivideHeads) {
  ModelSpec m = llama3(32, 4096, 32, 14336);
  EXPECT_EQ(m.validate(), "");
  m.kv_heads = 5;
  EXPECT_NE(m.validate().find("kv_heads (5) must divide heads (32)"), std::string::npos);
  m.kv_heads = 64;
  EXPECT_NE(m.validate(), "");
  m.kv_heads = 0;  // as many as heads: multi-head attention, QKV 3h wide
  EXPECT_EQ(m.qkv_width(), 3 * 4096);
  // RoPE rotates pairs of a head's features: an odd head dimension has none.
  m.hidden = 32 * 3;
  EXPECT_NE(m.validate().find("rotary needs an even head dimension"), std::string::npos);
  m.rotary = false;
  EXPECT_EQ(m.validate(), "");
}

}  // namespace
}  // namespace shardgym
