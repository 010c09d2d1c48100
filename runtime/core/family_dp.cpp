// The data-parallel family: every rank holds the whole block, the batch split P ways
// (docs/design.md §3). No tensor collectives; gradients are summed over all P replicas
// (cost.cpp block_grad_sync).
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

class DataParallel final : public StrategyFamily {
 public:
  DataParallel() : StrategyFamily(Field::kNone, Field::kNone, Field::kNone, Field::kNone) {}
  StrategyKind kind() const override { return StrategyKind::kDP; }
  const char* name() const override { return "dp"; }
  bool same(const Strategy&, const Strategy&) const override { return true; }
  int degree(const Strategy&) const override { return 1; }
  Mesh mesh(const Strategy&) const override { return {}; }

  std::string invalid_reason(const Strategy&, const ModelSpec&, BlockKind, int) const override {
    return {};
  }
  void catalog_entries(const ModelSpec&, int, int, const CatalogOptions&,
                       std::vector<Strategy>& out) const override {
    out.push_back(Strategy::dp());
  }

  void collectives(std::vector<Collective>&, const ModelSpec&, BlockKind, const Strategy&,
                   double) const override {}
  double rank_params(const BlockParamTerms& p, const Strategy&, double) const override {
    return p.norm + p.in_w + p.in_b + p.out_w + p.out_b;
  }
  // Korthikanti et al. Table 2, t = 1: 13·sbh + 5·as²b (attention incl. LN1), 21·sbh (MLP
  // incl. LN2), in the units of ActivationTerms.
  double stored_activation_units(const ActivationTerms& a, const Strategy&) const override {
    return a.attention ? (a.edge + a.qkv + a.proj) * a.sbh + a.scores * a.as2b
                       : (a.edge + a.mlp) * a.sbh;
  }
};

}  // namespace

const StrategyFamily& dp_family() {
  static const DataParallel f;
  return f;
}

}  // namespace shardgym
