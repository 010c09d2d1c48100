// ATP's two-dimensional tensor parallelism (Cheng et al. 2023, reconstructed from the
// authors' public code; docs/design.md §3): tp2d(d1=..,d2=..,first=row|col) on a d1 × d2
// mesh of t = d1·d2 ranks. Weights A[in, out] are sharded over d2 by rows and d1 by columns;
// the residual stream [N, h/d2] is sharded over d2 and replicated over d1.
#include <algorithm>
#include <sstream>

#include "runtime/core/catalog.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

constexpr long long kMaxDegree = 999999;  // the largest 6-digit value StrategyText reads

// The all-reduce of the QKV / fc1 input gradient over d1 is marked under_wgrad as Megatron's
// is: it does not depend on that GEMM's weight gradient, so the same overlap applies (not
// checked against ATP's code; both schemes get it so that neither is favoured).
// Widths: `q` of the QKV output (3h without GQA), `f1` of fc1's (2·ffn for SwiGLU); `stats`
// per token of the norm (mean and mean square, or RMSNorm's mean square alone).
void atp_2d(std::vector<Collective>& out, BlockKind kind, const Strategy& s, double n, double h,
            double q, double f1, double stats, int k) {
  const int d1 = s.d1, d2 = s.d2;
  const auto D1 = CommAxis::kMeshD1, D2 = CommAxis::kMeshD2;
  const auto AR = CollOp::kAllReduce, AG = CollOp::kAllGather, RS = CollOp::kReduceScatter;
  auto fwd = [&](bool fw) {
    // The norm over a hidden dim sharded on d2: its statistics all-reduced.
    add_collective(out, AR, D2, d2, stats * n, fw, "ln stats", k);
    if (kind == BlockKind::kAttention) {
      add_collective(out, RS, D2, d2, n * q / d1, fw, "attn.qkv rs(d2)", k);
      add_collective(out, AG, D2, d2, n * h / d1, fw, "attn.out ag(d2)", k);
      add_collective(out, AR, D1, d1, n * h / d2, fw, "attn.out ar(d1)", k);
    } else {
      add_collective(out, AR, D2, d2, n * f1 / d1, fw, "mlp.fc1 ar(d2)", k);
      add_collective(out, AR, D1, d1, n * h / d2, fw, "mlp.fc2 ar(d1)", k);
    }
  };
  fwd(true);
  if (s.recompute) fwd(false);
  add_collective(out, AR, D2, d2, stats * n, false, "ln stats bwd", k);
  if (kind == BlockKind::kAttention) {
    add_collective(out, RS, D2, d2, n * h / d1, false, "attn.out rs(d2) bwd", k);
    add_collective(out, AG, D2, d2, n * q / d1, false, "attn.qkv ag(d2) bwd", k);
    add_collective(out, AR, D1, d1, n * h / d2, false, "attn.qkv ar(d1) bwd", k, true);
  } else {
    add_collective(out, AR, D2, d2, n * f1 / d1, false, "mlp.fc2 ar(d2) bwd", k);
    add_collective(out, AR, D1, d1, n * h / d2, false, "mlp.fc1 ar(d1) bwd", k, true);
  }
}

class Atp2D final : public StrategyFamily {
 public:
  Atp2D() : StrategyFamily(Field::kD1, Field::kD2, Field::kNone, Field::kRowFirst) {}
  StrategyKind kind() const override { return StrategyKind::kTP2D; }
  const char* name() const override { return "tp2d"; }

  void require(const std::vector<std::string>& given, const StrategyText& t) const override {
    auto has = [&](const char* k) { return std::find(given.begin(), given.end(), k) != given.end(); };
    if (!has("d1") || !has("d2")) t.fail("tp2d needs d1= and d2=");
  }
  bool parse_option(Strategy& s, const std::string& key, const std::string& value,
                    StrategyText& t) const override {
    if (key == "d1") s.d1 = t.parse_int(key, value);
    else if (key == "d2") s.d2 = t.parse_int(key, value);
    else if (key == "first") {
      if (value != "row" && value != "col") t.fail("first must be row or col");
      s.row_first = value == "row";
    } else return false;
    return true;
  }
  void finish(Strategy& s, const StrategyText& t) const override {
    if (s.d1 < 1 || s.d2 < 1) t.fail("d1 and d2 must be ≥ 1");
    // degree() is d1·d2 in an int: bound the mesh like a single degree (6 digits), so that no
    // parsed strategy overflows it (d1=d2=999999 did).
    if (static_cast<long long>(s.d1) * s.d2 > kMaxDegree)
      t.fail("d1·d2 = " + std::to_string(static_cast<long long>(s.d1) * s.d2) + " is too large");
  }
  void print(const Strategy& s, std::vector<std::string>& o) const override {
    o.push_back("d1=" + std::to_string(s.d1));
    o.push_back("d2=" + std::to_string(s.d2));
    o.push_back(std::string("first=") + (s.row_first ? "row" : "col"));
  }
  bool same(const Strategy& a, const Strategy& b) const override {
    return a.d1 == b.d1 && a.d2 == b.d2 && a.row_first == b.row_first;
  }

  int degree(const Strategy& s) const override { return s.d1 * s.d2; }
  Mesh mesh(const Strategy& s) const override { return {s.d1, s.d2, s.row_first}; }
  double residual_divisor(const Strategy& s) const override { return s.d2; }
  bool atp_mesh() const override { return true; }

  std::string invalid_reason(const Strategy& s, const ModelSpec& m, BlockKind kind,
                             int) const override {
    std::ostringstream why;
    const int t = s.degree(), f = m.ffn_size();
    const bool attn = kind == BlockKind::kAttention;
    if (attn && m.heads % t != 0)
      why << s.to_string() << ": d1·d2=" << t << " does not divide heads=" << m.heads;
    else if (attn && m.kv_head_count() % t != 0)
      why << s.to_string() << ": d1·d2=" << t << " does not divide kv_heads=" << m.kv_head_count();
    else if (m.hidden % s.d2 != 0)
      why << s.to_string() << ": d2=" << s.d2 << " does not divide hidden=" << m.hidden;
    else if (attn && m.hidden % s.d1 != 0)
      why << s.to_string() << ": d1=" << s.d1 << " does not divide hidden=" << m.hidden;
    else if (!attn && f % s.d1 != 0)
      why << s.to_string() << ": d1=" << s.d1 << " does not divide ffn=" << f;
    return why.str();
  }
  // Every proper factorisation t = d1·d2 (both ≥ 2) of the degrees that divide the world,
  // row-first then column-first.
  void catalog_entries(const ModelSpec&, int world, int max_degree, const CatalogOptions& o,
                       std::vector<Strategy>& out) const override {
    if (!o.with_2d) return;
    for (int t = 4; t <= max_degree; ++t) {
      if (world % t != 0) continue;
      for (int d1 = 2; d1 <= t / 2; ++d1) {
        if (t % d1 != 0) continue;
        out.push_back(Strategy::tp2d(d1, t / d1, true));
        out.push_back(Strategy::tp2d(d1, t / d1, false));
      }
    }
  }

  void collectives(std::vector<Collective>& out, const ModelSpec& m, BlockKind kind,
                   const Strategy& s, double n) const override {
    atp_2d(out, kind, s, n, m.hidden, double(m.qkv_width()), double(m.fc1_width()),
           m.rmsnorm ? 1.0 : 2.0, s.chunks);
  }
  double rank_params(const BlockParamTerms& p, const Strategy& s, double) const override {
    const double t = s.d1 * s.d2;
    const double in_bias = p.attention ? p.in_b / t : p.in_b / s.d1;  // QKV bias: the RS over d2
    return p.norm / s.d2 + (p.in_w + p.out_w) / t + in_bias + p.out_b / s.d2;
  }
  // Replicated parts sharded over d2; GEMM inputs as placed.
  double stored_activation_units(const ActivationTerms& a, const Strategy& s) const override {
    return a.attention ? a.edge * a.sbh / s.d2 + a.qkv * a.sbh / a.t + a.proj * a.sbh / s.d1 +
                             a.scores * a.as2b / a.t
                       : a.edge * a.sbh / s.d2 + a.mlp * a.sbh / s.d1;
  }

  void kind_features(float out[2]) const override { out[0] = 0.0f, out[1] = 1.0f; }
};

}  // namespace

const StrategyFamily& tp2d_family() {
  static const Atp2D f;
  return f;
}

}  // namespace shardgym
