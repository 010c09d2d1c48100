// The conformance test of every registered strategy family (runtime/core/strategy_family.h):
// each family's entries print and parse back to themselves, its mesh has its degree's ranks
// and matches the groups its collectives use, its closed-form parameter count equals the
// placement's boxes on every rank, and the simulator's canonical key (runtime/sim/layout.h) is
// equal exactly where Strategy::operator== holds, within and across families. A new family
// is checked by adding nothing here.
#include "runtime/core/strategy_family.h"

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/placement.h"
#include "runtime/sim/layout.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

// Two shapes: GPT with 16 heads, and a Llama-like one with grouped-query attention.
std::vector<ModelSpec> models() {
  ModelSpec gpt = testing::gpt(2, 256, 16, 64, 1);
  gpt.global_batch = 64;
  ModelSpec llama = gpt;
  llama.set_llama_traits();
  llama.kv_heads = 8;
  llama.ffn = 512;
  return {gpt, llama};
}

struct Entry {
  ModelSpec model;
  int world;
  Strategy s;
};

// Every family's catalog entries on 4, 8 and 16 ranks with every option, with the shared
// options (chunks, full and selective recomputation) on each.
std::vector<Entry> entries_of(const StrategyFamily& f) {
  CatalogOptions o;
  o.uneven_heads_max_degree = 8;
  std::vector<Entry> out;
  for (const ModelSpec& m : models()) {
    for (int world : {4, 8, 16}) {
      std::vector<Strategy> v;
      f.catalog_entries(m, world, world, o, v);
      for (Strategy s : v) {
        for (int variant = 0; variant < 4; ++variant) {
          s.chunks = variant == 1 ? 2 : 1;
          s.recompute = variant == 2;
          s.selective = variant == 3;
          out.push_back({m, world, s});
        }
      }
    }
  }
  return out;
}

TEST(StrategyFamily, TheRegistryIsInKindOrderAndNamesAreDistinct) {
  const auto& all = strategy_families();
  ASSERT_GE(all.size(), 3u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(all[i]->kind()), i) << all[i]->name();
    EXPECT_EQ(&family_of(all[i]->kind()), all[i]);
    EXPECT_EQ(family_named(all[i]->name()), all[i]);
  }
  EXPECT_EQ(family_named("tp3d"), nullptr);
}

TEST(StrategyFamily, EntriesRoundTripAndTheirMeshHasTheirDegree) {
  for (const StrategyFamily* f : strategy_families()) {
    const std::vector<Entry> entries = entries_of(*f);
    ASSERT_FALSE(entries.empty()) << f->name();
    for (const Entry& e : entries) {
      const Strategy& s = e.s;
      const std::string text = s.to_string();
      EXPECT_EQ(s.kind, f->kind()) << text;
      EXPECT_EQ(text.rfind(f->name(), 0), 0u) << text;
      EXPECT_EQ(Strategy::parse(text), s) << text;
      const Mesh mesh = f->mesh(s);
      EXPECT_EQ(mesh.d1 * mesh.d2, s.degree()) << text;
      EXPECT_EQ(e.world % s.degree(), 0) << text;
      float features[2] = {-1, -1};
      f->kind_features(features);
      for (float x : features) EXPECT_TRUE(x == 0.0f || x == 1.0f) << text;
    }
  }
}

// Each collective runs over the group its axis names: the tensor group of t ranks, or the
// mesh's d1 or d2 group (cost.h comm_group).
TEST(StrategyFamily, CollectivesRunOverTheMeshGroups) {
  for (const StrategyFamily* f : strategy_families()) {
    for (const Entry& e : entries_of(*f)) {
      for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
        if (!strategy_invalid_reason(e.s, e.model, kind, e.world).empty()) continue;
        for (const Collective& c : block_collectives(e.model, kind, e.s, e.world)) {
          ASSERT_NE(c.axis, CommAxis::kData);
          const size_t group = comm_group(e.s, c.axis, 0, e.world).size();
          EXPECT_EQ(static_cast<size_t>(c.group_size), group)
              << e.s.to_string() << " " << c.what << " on " << comm_axis_name(c.axis);
        }
      }
    }
  }
}

// The family's closed-form parameters of rank i of the tensor group (block_rank_params with
// pos = i) equal the elements of that rank's boxes (placement.h).
TEST(StrategyFamily, ClosedFormParametersEqualThePlacementsBoxes) {
  for (const StrategyFamily* f : strategy_families()) {
    int checked = 0;
    for (const Entry& e : entries_of(*f)) {
      if (e.s.chunks != 1 || e.s.recompute || e.s.selective) continue;
      for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
        if (!strategy_invalid_reason(e.s, e.model, kind, e.world).empty()) continue;
        for (int q = 0; q < e.s.degree(); ++q) {
          const BlockPlacement p = place_block_mesh(e.s, q, e.world);
          EXPECT_EQ(double(block_param_elements(e.model, kind, p)),
                    block_rank_params(e.model, kind, e.s, p.i1))
              << e.s.to_string() << " rank " << q;
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 0) << f->name();
  }
}

// The simulator's caches index strategies by strategy_key: equal keys exactly where
// Strategy::operator== holds, across every family's entries. A field too large for its bits
// is kUnpackable (looked up by comparison instead).
TEST(StrategyFamily, StrategyKeyIsEqualExactlyWhereStrategiesAre) {
  std::vector<Strategy> all;
  for (const StrategyFamily* f : strategy_families())
    for (const Entry& e : entries_of(*f)) all.push_back(e.s);
  ASSERT_GT(all.size(), 100u);
  for (const Strategy& a : all) {
    ASSERT_NE(strategy_key(a), kUnpackable) << a.to_string();
    for (const Strategy& b : all)
      EXPECT_EQ(strategy_key(a) == strategy_key(b), a == b)
          << a.to_string() << " vs " << b.to_string();
  }
  Strategy huge = Strategy::tp1d(8);
  huge.chunks = 1 << 18;
  EXPECT_EQ(strategy_key(huge), kUnpackable);
}

}  // namespace
}  // namespace shardgym
