#include "runtime/core/catalog.h"

#include <algorithm>
#include <sstream>

#include "runtime/core/cost.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {

std::string strategy_invalid_reason(const Strategy& s, const ModelSpec& m, BlockKind kind,
                                    int world) {
  std::ostringstream why;
  const int t = s.degree();
  if (t > world || world % t != 0) {
    why << s.to_string() << ": degree " << t << " does not divide the world of " << world << " ranks";
  } else if ((world / t) % m.context_parallel != 0) {
    why << s.to_string() << ": " << world / t << " replicas do not group into the "
        << m.context_parallel << " ranks of @cp(" << m.context_parallel << ")";
  } else if (effective_global_batch(m, world) % (world / t) != 0) {
    why << s.to_string() << ": " << world / t << " replicas do not divide the global batch of "
        << effective_global_batch(m, world);
  } else {
    why << family_of(s).invalid_reason(s, m, kind, world);
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
  // Each family's entries, in family order (strategy_family.h).
  std::vector<Strategy> base;
  for (const StrategyFamily* f : strategy_families())
    f->catalog_entries(model, world, max_degree, options, base);
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
