// Megatron-LM's one-dimensional tensor parallelism (Shoeybi et al. 2019; sequence
// parallelism: Korthikanti et al. 2022; docs/design.md §3): tp1d(t=..[,sp=1][,heads=..]).
// Attention heads and FFN columns are split over t ranks, evenly or, with heads=, by the
// counts given (an id of the interned list rides in the Strategy: strategy.h).
#include <algorithm>
#include <sstream>

#include "runtime/core/catalog.h"
#include "runtime/core/placement.h"
#include "runtime/core/strategy_family.h"
#include "runtime/core/text.h"

namespace shardgym {
namespace {

// Per block: f before the column-parallel GEMM (identity fwd / all-reduce bwd) and g after the
// row-parallel GEMM (all-reduce fwd / identity bwd); with SP, g = all-gather fwd /
// reduce-scatter bwd before, ḡ = reduce-scatter fwd / all-gather bwd after. Both move
// 4·N·h·(t−1)/t per rank per block.
void megatron_1d(std::vector<Collective>& out, BlockKind kind, const Strategy& s, double n,
                 double h, int k) {
  const bool attn = kind == BlockKind::kAttention;
  const int t = s.t;
  const auto T = CommAxis::kTensor;
  const auto AR = CollOp::kAllReduce, AG = CollOp::kAllGather, RS = CollOp::kReduceScatter;
  auto fwd = [&](bool recompute_pass) {
    const bool f = !recompute_pass;  // a recompute replays the forward inside backward
    if (s.sp) {
      add_collective(out, AG, T, t, n * h, f, attn ? "attn.in g(ag)" : "mlp.in g(ag)", k);
      add_collective(out, RS, T, t, n * h, f, attn ? "attn.out g~(rs)" : "mlp.out g~(rs)", k);
    } else {
      add_collective(out, AR, T, t, n * h, f, attn ? "attn.out g" : "mlp.fc2 g", k);
    }
  };
  fwd(false);
  if (s.recompute) fwd(true);
  if (s.sp) {
    add_collective(out, RS, T, t, n * h, false, attn ? "attn.in g(rs) bwd" : "mlp.in g(rs) bwd", k, true);
    add_collective(out, AG, T, t, n * h, false, attn ? "attn.out g~(ag) bwd" : "mlp.out g~(ag) bwd", k);
  } else {
    add_collective(out, AR, T, t, n * h, false, attn ? "attn.qkv f bwd" : "mlp.fc1 f bwd", k, true);
  }
}

class Megatron1D final : public StrategyFamily {
 public:
  // The key: the degree, the uneven split by its interned id, sequence parallelism.
  Megatron1D() : StrategyFamily(Field::kT, Field::kHeadsId, Field::kSp, Field::kNone) {}
  StrategyKind kind() const override { return StrategyKind::kTP1D; }
  const char* name() const override { return "tp1d"; }

  void require(const std::vector<std::string>& given, const StrategyText& t) const override {
    if (std::find(given.begin(), given.end(), "t") == given.end()) t.fail("tp1d needs t=<degree>");
  }
  bool parse_option(Strategy& s, const std::string& key, const std::string& value,
                    StrategyText& t) const override {
    if (key == "t") {
      s.t = t.parse_int(key, value);
    } else if (key == "sp") {
      s.sp = t.parse_flag(key, value);
    } else if (key == "heads") {
      std::stringstream hs(value);
      std::string part;
      while (std::getline(hs, part, '/')) {
        if (t.heads.size() >= 4096) t.fail("heads= lists more than 4096 ranks");
        t.heads.push_back(t.parse_int(key, trim(part)));
      }
      if (t.heads.empty() || value.back() == '/') t.fail("heads= needs n/n/... (one per rank)");
    } else {
      return false;
    }
    return true;
  }
  void finish(Strategy& s, const StrategyText& t) const override {
    if (s.t < 1) t.fail("t must be ≥ 1");
    const std::vector<int>& heads = t.heads;
    if (heads.empty()) return;
    if (static_cast<int>(heads.size()) != s.t)
      t.fail("heads= lists " + std::to_string(heads.size()) + " ranks for t=" + std::to_string(s.t));
    for (int h : heads)
      if (h < 1) t.fail("every rank of heads= needs at least one head");
    // All equal is the even split: one spelling per strategy.
    if (std::all_of(heads.begin(), heads.end(), [&](int h) { return h == heads[0]; }))
      t.fail("heads= with equal counts is the even split: leave heads= out");
    try {
      s.set_heads(heads);
    } catch (const std::length_error& e) {
      t.fail(e.what());
    }
  }
  void print(const Strategy& s, std::vector<std::string>& o) const override {
    o.push_back("t=" + std::to_string(s.t));
    if (s.sp) o.push_back("sp=1");
    if (s.uneven()) {
      const std::vector<int>& hs = s.heads();
      std::string h;
      for (size_t i = 0; i < hs.size(); ++i) h += (i ? "/" : "") + std::to_string(hs[i]);
      o.push_back("heads=" + h);
    }
  }
  bool same(const Strategy& a, const Strategy& b) const override {
    return a.t == b.t && a.sp == b.sp && a.heads_id == b.heads_id;
  }

  int degree(const Strategy& s) const override { return s.t; }
  Mesh mesh(const Strategy& s) const override { return {s.t, 1, true}; }
  bool sequence_parallel(const Strategy& s) const override { return s.sp; }
  double residual_divisor(const Strategy& s) const override { return s.sp ? s.t : 1; }
  bool splits_heads_unevenly() const override { return true; }
  bool atp_mesh() const override { return true; }

  std::string invalid_reason(const Strategy& s, const ModelSpec& m, BlockKind kind,
                             int) const override {
    std::ostringstream why;
    const int t = s.degree(), f = m.ffn_size();
    const bool attn = kind == BlockKind::kAttention;
    if (s.uneven()) {
      // Uneven heads: placement's head_range says what does not fit (count per rank, at least
      // one head each, the model's heads in all, f/heads FFN columns per head).
      try {
        head_range(m, s, 0);
        if (s.sp && m.seq % t != 0)
          why << s.to_string() << ": t=" << t << " does not divide seq=" << m.seq;
      } catch (const std::invalid_argument& e) {
        why << s.to_string() << ": " << e.what();
      }
    } else if (attn && m.heads % t != 0) {
      why << s.to_string() << ": t=" << t << " does not divide heads=" << m.heads;
    } else if (attn && m.kv_head_count() % t != 0) {
      why << s.to_string() << ": t=" << t << " does not divide kv_heads=" << m.kv_head_count();
    } else if (!attn && f % t != 0) {
      why << s.to_string() << ": t=" << t << " does not divide ffn=" << f;
    } else if (s.sp && m.seq % t != 0) {
      why << s.to_string() << ": t=" << t << " does not divide seq=" << m.seq;
    }
    return why.str();
  }
  // The even splits of every degree 2..max that divides the world (with their sp twins), then
  // each even entry's light-position uneven twins (catalog.h uneven_heads_max_degree).
  void catalog_entries(const ModelSpec& m, int world, int max_degree, const CatalogOptions& o,
                       std::vector<Strategy>& out) const override {
    const size_t first = out.size();
    for (int t = 2; t <= max_degree; ++t) {
      if (world % t != 0) continue;
      out.push_back(Strategy::tp1d(t));
      if (o.with_sp) out.push_back(Strategy::tp1d(t, true));
    }
    for (size_t k = first, n = out.size(); k < n; ++k) {
      const Strategy even = out[k];
      if (even.t > o.uneven_heads_max_degree) continue;
      for (int i = 0; i < even.t; ++i) {
        // Whole query groups per rank (grouped-query attention): the split is one of groups.
        const int per_group = m.heads / m.kv_head_count();
        std::vector<int> heads = light_position_heads(m.kv_head_count(), even.t, i);
        if (heads.empty()) continue;
        for (int& c : heads) c *= per_group;
        Strategy s = even;
        s.set_heads(heads);
        if (s.uneven()) out.push_back(s);
      }
    }
  }

  void collectives(std::vector<Collective>& out, const ModelSpec& m, BlockKind kind,
                   const Strategy& s, double n) const override {
    megatron_1d(out, kind, s, n, m.hidden, s.chunks);
  }
  double rank_params(const BlockParamTerms& p, const Strategy& s, double part) const override {
    return p.norm + (p.in_w + p.in_b + p.out_w) * part / s.t + p.out_b;
  }
  // 13 = 5 (LayerNorm, dropout, residual: sequence-split with sp, else whole) + 8 (QKV output,
  // core, projection input: head-split); 21 = 5 + 16 (fc1 output, GeLU: columns).
  double stored_activation_units(const ActivationTerms& a, const Strategy& s) const override {
    return a.edge * a.sbh / (s.sp ? a.t : 1) +
           (a.attention ? a.qkv + a.proj : a.mlp) * a.sbh / a.th +
           (a.attention ? a.scores * a.as2b / a.th : 0);
  }

  void kind_features(float out[2]) const override { out[0] = 1.0f, out[1] = 0.0f; }
};

}  // namespace

const StrategyFamily& tp1d_family() {
  static const Megatron1D f;
  return f;
}

}  // namespace shardgym
