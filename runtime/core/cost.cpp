#include "runtime/core/cost.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/core/strategy_family.h"

namespace shardgym {
const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce: return "all_reduce";
    case CollOp::kAllGather: return "all_gather";
    case CollOp::kReduceScatter: return "reduce_scatter";
  }
  return "?";
}

const char* comm_axis_name(CommAxis axis) {
  switch (axis) {
    case CommAxis::kTensor: return "tp";
    case CommAxis::kMeshD1: return "d1";
    case CommAxis::kMeshD2: return "d2";
    case CommAxis::kData: return "dp";
    case CommAxis::kContext: return "cp";
  }
  return "?";
}

double Collective::elements_sent_per_rank() const {
  const double p = group_size;
  const double frac = (p - 1) / p;
  return op == CollOp::kAllReduce ? 2 * frac * elements : frac * elements;
}

int effective_global_batch(const ModelSpec& m, int world) {
  return m.global_batch > 0 ? m.global_batch : m.micro_batch * world;
}

int local_batch(const ModelSpec& m, const Strategy& s, int world) {
  const int replicas = world / s.degree();
  return effective_global_batch(m, world) / (replicas > 0 ? replicas : 1);
}

std::vector<Collective> block_collectives(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                          int world) {
  std::vector<Collective> out;
  const double n = double(local_batch(m, s, world)) * m.seq;
  family_of(s).collectives(out, m, kind, s, n);
  return out;
}

std::vector<Collective> block_grad_sync(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                        int world) {
  std::vector<Collective> out;
  add_collective(out, CollOp::kAllReduce, CommAxis::kData, s.replicas(world), block_rank_params(m, kind, s),
      false, "grad sync", 1);
  return out;
}

std::vector<Collective> block_context_collectives(const ModelSpec& m, BlockKind kind,
                                                  const Strategy& s, int world) {
  std::vector<Collective> out;
  const int c = m.context_parallel;
  // A strategy whose replicas do not group into c has no ring (strategy_invalid_reason
  // refuses it; its other costs are still priced, as for any invalid entry).
  if (c <= 1 || kind != BlockKind::kAttention || (world / s.degree()) % c != 0) return out;
  // K and V of the tensor group's tokens (this micro-batch's parts), its ranks' heads of them.
  const double n = double(local_batch(m, s, world)) * m.seq;
  const double kv = 2.0 * m.kv_head_count() * m.head_dim() * s.max_part() / s.degree();
  const double x = c * n * kv;  // the gathered whole: every part's K and V
  add_collective(out, CollOp::kAllGather, CommAxis::kContext, c, x, true, "attn.kv ring", 1);
  if (s.recompute)
    add_collective(out, CollOp::kAllGather, CommAxis::kContext, c, x, false, "attn.kv ring (recompute)", 1);
  add_collective(out, CollOp::kAllGather, CommAxis::kContext, c, x, false, "attn.kv ring bwd", 1);
  add_collective(out, CollOp::kReduceScatter, CommAxis::kContext, c, x, false, "attn.dkv ring bwd", 1);
  return out;
}

double block_comm_elements_per_rank(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                    int world) {
  double sum = 0;
  for (const auto& c : block_collectives(m, kind, s, world)) sum += c.elements_sent_per_rank();
  return sum;
}

double attention_core_flops(const ModelSpec& m, BlockKind kind, double sequences) {
  if (kind != BlockKind::kAttention) return 0;
  // QKᵀ + ·V over every query head (grouped-query attention shares K and V, not the work);
  // with context parallelism a part's queries meet the whole sequence's keys (full_seq).
  const double core = 4 * sequences * m.seq * double(m.full_seq()) * m.hidden;
  return m.flash_attention ? core / 2 : core;  // a causal fused kernel skips the masked half
}

double block_forward_flops(const ModelSpec& m, BlockKind kind, double sequences) {
  const double n = sequences * m.seq, h = m.hidden, f = m.ffn_size();
  // QKV (h × q) + out (h × h); 8·n·h² without GQA
  if (kind == BlockKind::kAttention)
    return 2 * n * h * (double(m.qkv_width()) + h) + attention_core_flops(m, kind, sequences);
  return 2 * n * h * (double(m.fc1_width()) + f);  // fc1 (h × f or h × 2f) + fc2 (f × h)
}

double head_part(const Strategy& s, int pos) { return pos < 0 ? s.max_part() : s.part(pos); }

double block_rank_flops(const ModelSpec& m, BlockKind kind, const Strategy& s, int world,
                        int pos) {
  // Every FLOP of a tp1d block is split by heads or FFN columns: an uneven rank's part scales all.
  const double b = local_batch(m, s, world), t = s.degree() / head_part(s, pos);
  const double fwd = block_forward_flops(m, kind, b) / t;
  const double core = attention_core_flops(m, kind, b) / t;
  // Flash attention: the core's backward is 2.5× its forward instead of 2×.
  double total = 3 * fwd + (m.flash_attention ? 0.5 * core : 0.0);
  if (s.recompute) total += fwd;
  else if (s.selective && !m.flash_attention) total += core;  // flash recomputes anyway
  return total;
}

double block_memory_bound_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                int world, int pos) {
  const double n = double(local_batch(m, s, world)) * m.seq;
  const double h = m.hidden, f = m.ffn_size(), t = s.degree(), e = dtype_bytes(m.dtype);
  const double th = t / head_part(s, pos);  // the head-split terms' divisor
  // The residual stream is sharded by sequence parallelism (tp1d sp) and over d2 (tp2d).
  const double hs = h / family_of(s).residual_divisor(s);
  // The norm (read, write; LayerNorm and RMSNorm alike) and (bias +) dropout + residual add
  // (read 2, write 1, with dropout a 1-byte mask).
  double elems = 2 * hs + (3 + (m.dropout ? 1 / e : 0.0)) * hs;
  if (kind == BlockKind::kAttention) {
    const double kv = double(m.kv_head_count()) * m.head_dim();  // K's (and V's) width
    // Rotary embeddings: read and write Q and K (Megatron-Core's fused RoPE, one pass each).
    if (m.rotary) elems += 2 * (h + kv) / th;
    if (m.flash_attention) elems += (2 * h + 2 * kv) / th;  // Q, K, V read and O written
    return n * e * elems + attention_score_bytes(m, kind, s, world, pos);
  }
  // (bias +) GeLU: read and write the fc1 output; SwiGLU: read gate and up, write one.
  return n * e * (elems + (m.swiglu ? 3 : 2) * f / th);
}

bool softmax_unfused(const ModelSpec& m, const Strategy& s, int world, int pos) {
  if (m.flash_attention || dtype_bytes(m.dtype) != 2) return false;
  const int sk = m.seq;
  if (sk <= 16 || sk > 4096 || sk % 4 != 0) return true;
  const double batches =
      double(local_batch(m, s, world)) * m.heads * head_part(s, pos) / s.degree();
  int pow2 = 1;
  while (pow2 < sk) pow2 <<= 1;
  const int warp = std::min(pow2, 32), rows_per_warp = pow2 <= 128 ? 2 : 1;
  const int per_block = (128 / warp) * rows_per_warp;
  auto multiple_of = [batches](int k) { return std::fmod(batches, double(k)) == 0; };
  return !(std::floor(batches) == batches && multiple_of(4) && multiple_of(per_block));
}

double attention_score_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s, int world,
                             int pos) {
  if (kind != BlockKind::kAttention || m.flash_attention) return 0;
  const double b = local_batch(m, s, world), e = dtype_bytes(m.dtype);
  const double scores =
      double(m.heads) * head_part(s, pos) / s.degree() * m.seq * double(m.seq) * b;
  // scale-mask-softmax: read and write the scores (fused), or, unfused in fp32, cast up
  // (e + 4), scale (4 + 4), mask (4 + 1 + 4), softmax (4 + 4), cast back (4 + e);
  // dropout: read, write, 1-byte mask.
  const double softmax = softmax_unfused(m, s, world, pos) ? 2 * (e + 4) + 8 + 9 + 8 : 2 * e;
  return scores * (softmax + (m.dropout ? 2 * e + 1 : 0.0));
}

double block_rank_params(const ModelSpec& m, BlockKind kind, const Strategy& s, int pos) {
  const double h = m.hidden, f = m.ffn_size(), bias = m.linear_bias ? 1 : 0;
  const bool attn = kind == BlockKind::kAttention;
  const double in_n = attn ? double(m.qkv_width()) : double(m.fc1_width());  // QKV / fc1 outputs
  const double in_w = h * in_n, in_b = bias * in_n;
  const double out_w = attn ? h * h : f * h, out_b = bias * h;  // out / fc2
  const double norm = m.norm_params_per_hidden() * h;
  return family_of(s).rank_params({norm, in_w, in_b, out_w, out_b, attn}, s, head_part(s, pos));
}

double block_activation_bytes(const ModelSpec& m, BlockKind kind, const Strategy& s, int world,
                              bool prev_recomputes, int pos) {
  const double sbh = double(m.seq) * local_batch(m, s, world) * m.hidden;
  const double as2b = double(m.heads) * m.seq * m.seq * local_batch(m, s, world);
  // Llama's shapes in the paper's units (sbh): the head-split tensors are Q (2), K and V
  // (4·kv/h) and the projection input (2), 8 without GQA; the MLP keeps fc1's output and the
  // activation's (2·f each, GeLU) or gate, up and SwiGLU's output (2·f each, three): 16 and
  // 24 for f = 4h. Without dropout its 1-byte masks go (5 → 4 per block, scores 5 → 2).
  const double qkv = 2 + 4.0 * m.kv_head_count() / m.heads;  // Q, K, V: 6 without GQA
  const double mlp = (m.swiglu ? 6.0 : 4.0) * m.ffn_size() / m.hidden;  // 16 for GeLU, f = 4h
  const double edge = m.dropout ? 5.0 : 4.0, score_units = m.dropout ? 5.0 : 2.0;
  const double scale = dtype_bytes(m.dtype) / 2.0;  // the paper counts 16-bit activations
  const bool attn = kind == BlockKind::kAttention;
  const double t = s.degree(), th = t / head_part(s, pos);  // th: the head-split terms' divisor
  const bool sharded_seq = family_of(s).sequence_parallel(s);
  // Selective recomputation and flash attention keep no a·s² scores (Korthikanti Table 2:
  // the 5·a·s/h term goes); flash keeps its output and log-sum-exp, counted in the s·b·h terms.
  const double scores = (s.selective || m.flash_attention) ? 0.0 : 1.0;
  if (s.recompute) {
    // The block keeps only its input; an MLP after a recomputed attention of the same layer
    // recomputes from the layer input, as in full-layer recomputation (2·s·b·h per layer).
    if (!attn && prev_recomputes) return 0;
    return scale * 2 * sbh / (sharded_seq ? t : 1);
  }
  // Unfused, the softmax output is kept in fp32 (4 bytes, not the 2 of the paper's 5·as²b).
  const double e = dtype_bytes(m.dtype);
  const double fp32_probs =
      attn && scores > 0 && softmax_unfused(m, s, world, pos) ? (4 - e) / scale : 0;
  ActivationTerms a;
  a.sbh = sbh, a.as2b = as2b, a.edge = edge, a.qkv = qkv, a.mlp = mlp;
  a.scores = (score_units + fp32_probs) * scores;
  a.t = t, a.th = th, a.attention = attn;
  return scale * family_of(s).stored_activation_units(a, s);
}

double layer_activation_bytes(const ModelSpec& m, const Strategy& attn, const Strategy& mlp,
                              int world) {
  return block_activation_bytes(m, BlockKind::kAttention, attn, world, false) +
         block_activation_bytes(m, BlockKind::kMlp, mlp, world, attn.recompute);
}

std::vector<int> comm_group(const Strategy& s, CommAxis axis, int rank, int world,
                            int context) {
  const int t = s.degree();
  if (t <= 0 || world % t != 0) throw std::invalid_argument("degree does not divide the world");
  const int base = rank / t * t, local = rank % t;
  std::vector<int> g;
  if (axis == CommAxis::kContext) {
    const int c = std::max(1, context), first = rank / t / c * c;
    if ((world / t) % c != 0) throw std::invalid_argument("context does not divide the replicas");
    for (int k = 0; k < c; ++k) g.push_back((first + k) * t + local);
    return g;
  }
  if (axis == CommAxis::kData) {
    for (int r = local; r < world; r += t) g.push_back(r);
    return g;
  }
  // The family's mesh (strategy_family.h). A t × 1 mesh (tp1d, dp) is the whole group on d1
  // and {rank} on d2, whichever axis comes first.
  const Mesh mesh = family_of(s).mesh(s);
  if (axis == CommAxis::kTensor || (mesh.d2 == 1 && axis == CommAxis::kMeshD1)) {
    for (int r = base; r < base + t; ++r) g.push_back(r);
    return g;
  }
  if (mesh.d2 == 1) return {rank};
  // first=row puts d2 on consecutive ranks (local = i·d2 + j), first=col puts d1 there
  // (local = j·d1 + i).
  const int d1 = mesh.d1, d2 = mesh.d2;
  const bool row_first = mesh.row_first;
  const int i = row_first ? local / d2 : local % d1;
  const int j = row_first ? local % d2 : local / d1;
  auto at = [&](int ii, int jj) { return base + (row_first ? ii * d2 + jj : jj * d1 + ii); };
  if (axis == CommAxis::kMeshD2) {
    for (int jj = 0; jj < d2; ++jj) g.push_back(at(i, jj));
  } else {
    for (int ii = 0; ii < d1; ++ii) g.push_back(at(ii, j));
  }
  std::sort(g.begin(), g.end());
  return g;
}

}  // namespace shardgym
