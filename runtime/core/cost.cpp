#include "runtime/core/cost.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardgym {
namespace {

// Collectives over a group of one rank move nothing: they are left out.
void add(std::vector<Collective>& out, CollOp op, CommAxis axis, int group, double x, bool fwd,
         const char* what, int chunks, bool under_wgrad = false) {
  if (group <= 1 || x <= 0) return;
  for (int c = 0; c < chunks; ++c)
    out.push_back({op, axis, group, x / chunks, fwd, what, under_wgrad});
}

// Megatron 1D (Shoeybi et al.; SP: Korthikanti et al.). Per block: f before the
// column-parallel GEMM (identity fwd / all-reduce bwd) and g after the row-parallel GEMM
// (all-reduce fwd / identity bwd); with SP, g = all-gather fwd / reduce-scatter bwd before,
// ḡ = reduce-scatter fwd / all-gather bwd after. Both move 4·N·h·(t−1)/t per rank per block.
void megatron_1d(std::vector<Collective>& out, BlockKind kind, const Strategy& s, double n,
                 double h, int k) {
  const bool attn = kind == BlockKind::kAttention;
  const int t = s.t;
  auto fwd = [&](bool recompute_pass) {
    const bool f = !recompute_pass;  // a recompute replays the forward inside backward
    if (s.sp) {
      add(out, CollOp::kAllGather, CommAxis::kTensor, t, n * h, f, attn ? "attn.in g(ag)" : "mlp.in g(ag)", k);
      add(out, CollOp::kReduceScatter, CommAxis::kTensor, t, n * h, f, attn ? "attn.out g~(rs)" : "mlp.out g~(rs)", k);
    } else {
      add(out, CollOp::kAllReduce, CommAxis::kTensor, t, n * h, f, attn ? "attn.out g" : "mlp.fc2 g", k);
    }
  };
  fwd(false);
  if (s.recompute) fwd(true);
  if (s.sp) {
    add(out, CollOp::kReduceScatter, CommAxis::kTensor, t, n * h, false, attn ? "attn.in g(rs) bwd" : "mlp.in g(rs) bwd", k, true);
    add(out, CollOp::kAllGather, CommAxis::kTensor, t, n * h, false, attn ? "attn.out g~(ag) bwd" : "mlp.out g~(ag) bwd", k);
  } else {
    add(out, CollOp::kAllReduce, CommAxis::kTensor, t, n * h, false, attn ? "attn.qkv f bwd" : "mlp.fc1 f bwd", k, true);
  }
}

// ATP 2D (Cheng et al. 2023, reconstructed from the authors' public code). The all-reduce of
// the QKV / fc1 input gradient over d1 is marked under_wgrad as Megatron's is: it does not
// depend on that GEMM's weight gradient, so the same overlap applies (not checked against
// ATP's code; both schemes get it so that neither is favoured). Weights
// A[in,out] placed [Shard(0) on one axis, Shard(1) on the other]; the residual stream is
// [N, h/d2], sharded over the d2 axis, replicated over d1.
// Widths: `q` of the QKV output (3h without GQA), `f1` of fc1's (2·ffn for SwiGLU); `stats`
// per token of the norm (mean and mean square, or RMSNorm's mean square alone).
void atp_2d(std::vector<Collective>& out, BlockKind kind, const Strategy& s, double n, double h,
            double q, double f1, double stats, int k) {
  const int d1 = s.d1, d2 = s.d2;
  const auto D1 = CommAxis::kMeshD1, D2 = CommAxis::kMeshD2;
  auto fwd = [&](bool fw) {
    // The norm over a hidden dim sharded on d2: its statistics all-reduced.
    add(out, CollOp::kAllReduce, D2, d2, stats * n, fw, "ln stats", k);
    if (kind == BlockKind::kAttention) {
      add(out, CollOp::kReduceScatter, D2, d2, n * q / d1, fw, "attn.qkv rs(d2)", k);
      add(out, CollOp::kAllGather, D2, d2, n * h / d1, fw, "attn.out ag(d2)", k);
      add(out, CollOp::kAllReduce, D1, d1, n * h / d2, fw, "attn.out ar(d1)", k);
    } else {
      add(out, CollOp::kAllReduce, D2, d2, n * f1 / d1, fw, "mlp.fc1 ar(d2)", k);
      add(out, CollOp::kAllReduce, D1, d1, n * h / d2, fw, "mlp.fc2 ar(d1)", k);
    }
  };
  fwd(true);
  if (s.recompute) fwd(false);
  add(out, CollOp::kAllReduce, D2, d2, stats * n, false, "ln stats bwd", k);
  if (kind == BlockKind::kAttention) {
    add(out, CollOp::kReduceScatter, D2, d2, n * h / d1, false, "attn.out rs(d2) bwd", k);
    add(out, CollOp::kAllGather, D2, d2, n * q / d1, false, "attn.qkv ag(d2) bwd", k);
    add(out, CollOp::kAllReduce, D1, d1, n * h / d2, false, "attn.qkv ar(d1) bwd", k, true);
  } else {
    add(out, CollOp::kAllReduce, D2, d2, n * f1 / d1, false, "mlp.fc2 ar(d2) bwd", k);
    add(out, CollOp::kAllReduce, D1, d1, n * h / d2, false, "mlp.fc1 ar(d1) bwd", k, true);
  }
}

}  // namespace

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
  const double h = m.hidden;
  if (s.kind == StrategyKind::kTP1D) megatron_1d(out, kind, s, n, h, s.chunks);
  if (s.kind == StrategyKind::kTP2D)
    atp_2d(out, kind, s, n, h, double(m.qkv_width()), double(m.fc1_width()),
           m.rmsnorm ? 1.0 : 2.0, s.chunks);
  return out;
}

std::vector<Collective> block_grad_sync(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                        int world) {
  std::vector<Collective> out;
  add(out, CollOp::kAllReduce, CommAxis::kData, s.replicas(world), block_rank_params(m, kind, s),
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
  add(out, CollOp::kAllGather, CommAxis::kContext, c, x, true, "attn.kv ring", 1);
  if (s.recompute) add(out, CollOp::kAllGather, CommAxis::kContext, c, x, false, "attn.kv ring (recompute)", 1);
  add(out, CollOp::kAllGather, CommAxis::kContext, c, x, false, "attn.kv ring bwd", 1);
  add(out, CollOp::kReduceScatter, CommAxis::kContext, c, x, false, "attn.dkv ring bwd", 1);
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
  double hs = h;
  if (s.kind == StrategyKind::kTP1D && s.sp) hs = h / t;
  if (s.kind == StrategyKind::kTP2D) hs = h / s.d2;
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
  switch (s.kind) {
    case StrategyKind::kDP: return norm + in_w + in_b + out_w + out_b;
    case StrategyKind::kTP1D: return norm + (in_w + in_b + out_w) * head_part(s, pos) / s.t + out_b;
    case StrategyKind::kTP2D: {
      const double t = s.d1 * s.d2;
      const double in_bias = attn ? in_b / t : in_b / s.d1;  // QKV bias follows the RS over d2
      return norm / s.d2 + (in_w + out_w) / t + in_bias + out_b / s.d2;
    }
  }
  return 0;
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
  const bool sharded_seq = s.kind == StrategyKind::kTP1D && s.sp;
  // Selective recomputation and flash attention keep no a·s² scores (Korthikanti Table 2:
  // the 5·a·s/h term goes); flash keeps its output and log-sum-exp, counted in the s·b·h terms.
  const double scores = (s.selective || m.flash_attention) ? 0.0 : 1.0;
  if (s.recompute) {
    // The block keeps only its input; an MLP after a recomputed attention of the same layer
    // recomputes from the layer input, as in full-layer recomputation (2·s·b·h per layer).
    if (!attn && prev_recomputes) return 0;
    return scale * 2 * sbh / (sharded_seq ? t : 1);
  }
  double bytes = 0;
  // Unfused, the softmax output is kept in fp32 (4 bytes, not the 2 of the paper's 5·as²b).
  const double e = dtype_bytes(m.dtype);
  const double fp32_probs =
      attn && scores > 0 && softmax_unfused(m, s, world, pos) ? (4 - e) / scale : 0;
  switch (s.kind) {
    case StrategyKind::kDP:  // 13·sbh + 5·as²b (attention incl. LN1), 21·sbh (MLP incl. LN2)
      bytes = attn ? (edge + qkv + 2) * sbh + (score_units + fp32_probs) * scores * as2b
                   : (edge + mlp) * sbh;
      break;
    case StrategyKind::kTP1D:
      // 13 = 5 (LayerNorm, dropout, residual: sequence-split with sp, else whole) + 8 (QKV
      // output, core, projection input: head-split); 21 = 5 + 16 (fc1 output, GeLU: columns).
      bytes = edge * sbh / (sharded_seq ? t : 1) + (attn ? qkv + 2 : mlp) * sbh / th +
              (attn ? (score_units + fp32_probs) * scores * as2b / th : 0);
      break;
    case StrategyKind::kTP2D:  // replicated parts sharded over d2; GEMM inputs as placed
      bytes = attn ? edge * sbh / s.d2 + qkv * sbh / t + 2 * sbh / s.d1 +
                         (score_units + fp32_probs) * scores * as2b / t
                   : edge * sbh / s.d2 + mlp * sbh / s.d1;
      break;
  }
  return scale * bytes;
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
  if (axis == CommAxis::kTensor || s.kind != StrategyKind::kTP2D) {
    if (axis == CommAxis::kMeshD2) return {rank};  // a 1D group has d2 = 1
    for (int r = base; r < base + t; ++r) g.push_back(r);
    return g;
  }
  // Mesh: first=row puts d2 on consecutive ranks (local = i·d2 + j), first=col puts d1 there
  // (local = j·d1 + i).
  const int d1 = s.d1, d2 = s.d2;
  const int i = s.row_first ? local / d2 : local % d1;
  const int j = s.row_first ? local % d2 : local / d1;
  auto at = [&](int ii, int jj) { return base + (s.row_first ? ii * d2 + jj : jj * d1 + ii); };
  if (axis == CommAxis::kMeshD2) {
    for (int jj = 0; jj < d2; ++jj) g.push_back(at(i, jj));
  } else {
    for (int ii = 0; ii < d1; ++ii) g.push_back(at(ii, j));
  }
  std::sort(g.begin(), g.end());
  return g;
}

}  // namespace shardgym
