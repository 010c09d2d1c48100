#include "runtime/core/catalog.h"

#include <algorithm>
#include <sstream>

#include "runtime/core/cost.h"
#include "runtime/core/placement.h"

namespace shardgym {

std::string strategy_invalid_reason(const Strategy& s, const ModelSpec& m, BlockKind kind,
                                    int world) {
  std::ostringstream why;
  const int t = s.degree();
  const bool attn = kind == BlockKind::kAttention;
  const int f = m.ffn_size();
  if (t > world || world % t != 0) {
    why << s.to_string() << ": degree " << t << " does not divide the world of " << world << " ranks";
  } else if ((world / t) % m.context_parallel != 0) {
    why << s.to_string() << ": " << world / t << " replicas do not group into the "
        << m.context_parallel << " ranks of @cp(" << m.context_parallel << ")";
  } else if (effective_global_batch(m, world) % (world / t) != 0) {
    why << s.to_string() << ": " << world / t << " replicas do not divide the global batch of "
        << effective_global_batch(m, world);
  } else if (s.kind == StrategyKind::kTP1D && s.uneven()) {
    // Uneven heads: placement's head_range says what does not fit (count per rank, at least
    // one head each, the model's heads in all, f/heads FFN columns per head).
    try {
      head_range(m, s, 0);
      if (s.sp && m.seq % t != 0)
        why << s.to_string() << ": t=" << t << " does not divide seq=" << m.seq;
    } catch (const std::invalid_argument& e) {
      why << s.to_string() << ": " << e.what();
    }
  } else if (s.kind == StrategyKind::kTP1D) {
    if (attn && m.heads % t != 0) why << s.to_string() << ": t=" << t << " does not divide heads=" << m.heads;
    else if (attn && m.kv_head_count() % t != 0)
      why << s.to_string() << ": t=" << t << " does not divide kv_heads=" << m.kv_head_count();
    else if (!attn && f % t != 0) why << s.to_string() << ": t=" << t << " does not divide ffn=" << f;
    else if (s.sp && m.seq % t != 0) why << s.to_string() << ": t=" << t << " does not divide seq=" << m.seq;
  } else if (s.kind == StrategyKind::kTP2D) {
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
  }
  if (why.str().empty() && s.chunks > 1 && local_batch(m, s, world) % s.chunks != 0) {
    why << s.to_string() << ": chunks=" << s.chunks << " does not divide the local batch of "
        << local_batch(m, s, world);
  }
  return why.str();
}

std::vector<int> light_position_heads(int heads, int t, int i) {
  if (t < 2 || i < 0 || i >= t || heads < t) return {};
  const int light = std::max(1, heads / (2 * t)), rest = heads - light;
  std::vector<int> out(t, 0);
  out[i] = light;
  int k = 0;
  for (int j = 0; j < t; ++j) {
    if (j == i) continue;
    out[j] = rest / (t - 1) + (k < rest % (t - 1) ? 1 : 0);
    ++k;
  }
  if (*std::min_element(out.begin(), out.end()) < 1 || out[i] * t >= heads) return {};
  return out;
}

StrategyCatalog::StrategyCatalog(const ModelSpec& model, int world, CatalogOptions options)
    : model_(model), world_(world) {
  const int max_degree = options.max_degree > 0 ? options.max_degree : world;
  std::vector<Strategy> base = {Strategy::dp()};
  for (int t = 2; t <= max_degree; ++t) {
    if (world % t != 0) continue;
    base.push_back(Strategy::tp1d(t));
    if (options.with_sp) base.push_back(Strategy::tp1d(t, true));
  }
  // Uneven shards: each tp1d entry's light-position twins, after the even entries.
  for (size_t k = 0, n = base.size(); k < n; ++k) {
    const Strategy even = base[k];
    if (even.kind != StrategyKind::kTP1D || even.t > options.uneven_heads_max_degree) continue;
    for (int i = 0; i < even.t; ++i) {
      // Whole query groups per rank (grouped-query attention): the split is one of groups.
      const int per_group = model.heads / model.kv_head_count();
      std::vector<int> heads = light_position_heads(model.kv_head_count(), even.t, i);
      if (heads.empty()) continue;
      for (int& c : heads) c *= per_group;
      Strategy s = even;
      s.set_heads(heads);
      if (s.uneven()) base.push_back(s);
    }
  }
  if (options.with_2d) {
    for (int t = 4; t <= max_degree; ++t) {
      if (world % t != 0) continue;
      for (int d1 = 2; d1 <= t / 2; ++d1) {
        if (t % d1 != 0) continue;
        base.push_back(Strategy::tp2d(d1, t / d1, true));
        base.push_back(Strategy::tp2d(d1, t / d1, false));
      }
    }
  }
  std::vector<int> chunks = options.chunks.empty() ? std::vector<int>{1} : options.chunks;
  for (int recompute = 0; recompute <= (options.with_recompute ? 1 : 0); ++recompute) {
    for (int k : chunks) {
      for (Strategy s : base) {
        s.chunks = k;
        s.recompute = recompute != 0;
        entries_.push_back(s);
      }
    }
  }
  for (const auto& s : entries_) {
    mask_attention_.push_back(strategy_invalid_reason(s, model_, BlockKind::kAttention, world).empty());
    mask_mlp_.push_back(strategy_invalid_reason(s, model_, BlockKind::kMlp, world).empty());
  }
}

int StrategyCatalog::index_of(const Strategy& s) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i] == s) return static_cast<int>(i);
  return -1;
}

std::string StrategyCatalog::why_invalid(BlockKind kind, int index) const {
  return strategy_invalid_reason(entries_.at(index), model_, kind, world_);
}

const std::vector<uint8_t>& StrategyCatalog::shape_mask(BlockKind kind) const {
  return kind == BlockKind::kAttention ? mask_attention_ : mask_mlp_;
}

}  // namespace shardgym
