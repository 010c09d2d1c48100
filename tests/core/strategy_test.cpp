#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/plan.h"
#include "runtime/core/strategy.h"

namespace shardgym {
namespace {

TEST(Strategy, ParsePrintRoundTripsEveryCatalogEntry) {
  ModelSpec m;
  m.layers = 4;
  const StrategyCatalog catalog(m, 64);
  ASSERT_GT(catalog.size(), 50);
  for (const auto& s : catalog.entries()) {
    const std::string text = s.to_string();
    EXPECT_EQ(Strategy::parse(text), s) << text;
    EXPECT_EQ(Strategy::parse(text).to_string(), text);
  }
}

TEST(Strategy, ParsesTheDesignNotation) {
  EXPECT_EQ(Strategy::parse("dp"), Strategy::dp());
  EXPECT_EQ(Strategy::parse("tp1d(t=4)"), Strategy::tp1d(4));
  EXPECT_EQ(Strategy::parse(" tp1d( t=4 , sp=1 ) "), Strategy::tp1d(4, true));
  EXPECT_EQ(Strategy::parse("tp2d(d1=2,d2=4,first=col)"), Strategy::tp2d(2, 4, false));
  Strategy s = Strategy::tp2d(2, 4, true);
  s.chunks = 2;
  s.recompute = true;
  EXPECT_EQ(Strategy::parse("tp2d(d1=2,d2=4,first=row,chunks=2,recompute=1)"), s);
  EXPECT_EQ(s.degree(), 8);
  EXPECT_EQ(s.replicas(64), 8);
}

TEST(Strategy, RejectsMalformedTextWithTheReason) {
  for (const char* bad : {"", "tp3d(t=2)", "tp1d", "tp1d(t=x)", "tp1d(t=2", "tp1d(t=2,sp=2)",
                          "tp2d(d1=2)", "tp2d(d1=2,d2=2,first=up)", "dp(t=2)", "tp1d(t=2,t=4)",
                          "tp1d(t=0)", "tp1d(t=2,chunks=0)"}) {
    EXPECT_THROW(Strategy::parse(bad), std::invalid_argument) << bad;
  }
  try {
    Strategy::parse("tp1d(t=2,d1=2)");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'d1' does not apply to tp1d"), std::string::npos) << e.what();
  }
}

// Seen while writing fuzz/strategy_fuzz, reproduced by it (UBSan): d1·d2 overflowed the int
// that degree() returns.
TEST(Strategy, RejectsAMeshWhoseDegreeOverflows) {
  EXPECT_THROW(Strategy::parse("tp2d(d1=999999,d2=999999,first=row)"), std::invalid_argument);
  EXPECT_THROW(Strategy::parse("tp2d(d1=1000,d2=1000,first=row)"), std::invalid_argument);
  EXPECT_EQ(Strategy::parse("tp2d(d1=999,d2=1000,first=row)").degree(), 999000);
}

TEST(Plan, TextFormsRoundTrip) {
  const int blocks = 8;
  const Plan u = Plan::parse("uniform:tp1d(t=8)", blocks);
  EXPECT_EQ(u, Plan::uniform(Strategy::tp1d(8), blocks));
  EXPECT_EQ(Plan::parse(u.to_string(), blocks), u);
  const Plan alt = Plan::parse("attn=tp1d(t=4)|mlp=tp2d(d1=2,d2=2,first=col)", blocks);
  EXPECT_EQ(alt.blocks[3], Strategy::tp2d(2, 2, false));
  EXPECT_EQ(Plan::parse(alt.to_string(), blocks), alt);
  const Plan rep = Plan::parse("3*dp;tp1d(t=2,sp=1);4*tp2d(d1=2,d2=2,first=row)", blocks);
  EXPECT_EQ(rep.blocks[3], Strategy::tp1d(2, true));
  EXPECT_EQ(Plan::parse(rep.to_string(), blocks), rep);
}

TEST(Plan, RejectsWrongBlockCountAndShapes) {
  EXPECT_THROW(Plan::parse("dp;dp;dp", 4), std::invalid_argument);
  EXPECT_THROW(Plan::parse("2*dp;x", 4), std::invalid_argument);
  // Seen while writing fuzz/plan_fuzz, reproduced by it (out-of-memory): repeat counts were
  // expanded before the total was checked, so 400 entries of 999999*dp asked for gigabytes.
  // Now refused at the first entry too many.
  std::string huge = "999999*dp";
  for (int i = 0; i < 400; ++i) huge += ";999999*dp";
  EXPECT_THROW(Plan::parse(huge, 48), std::invalid_argument);
  EXPECT_THROW(Plan::parse("48*dp;dp", 48), std::invalid_argument);
  EXPECT_EQ(Plan::parse("47*dp;dp", 48).size(), 48);
  ModelSpec m;
  m.layers = 2;
  m.heads = 12;
  m.hidden = 768;
  const Plan p = Plan::parse("uniform:tp1d(t=8)", m.num_blocks());
  const std::string why = p.validate(m, 8);
  EXPECT_NE(why.find("does not divide heads=12"), std::string::npos) << why;
  EXPECT_THROW(resolve_plan("uniform:tp1d(t=8)", m, ClusterSpec{}), std::invalid_argument);
}

TEST(Catalog, MasksFollowDivisibility) {
  const ModelSpec m = ModelSpec::gpt(/*layers=*/1, /*hidden=*/768, /*heads=*/12, /*seq=*/1024);
  const StrategyCatalog c(m, 8);
  const int t8 = c.index_of(Strategy::tp1d(8));
  const int t4 = c.index_of(Strategy::tp1d(4));
  ASSERT_GE(t8, 0);
  ASSERT_GE(t4, 0);
  EXPECT_FALSE(c.shape_mask(BlockKind::kAttention)[t8]);  // 12 heads
  EXPECT_TRUE(c.shape_mask(BlockKind::kMlp)[t8]);         // ffn 3072
  EXPECT_TRUE(c.shape_mask(BlockKind::kAttention)[t4]);
  EXPECT_NE(c.why_invalid(BlockKind::kAttention, t8), "");
}

// catalog.uneven_heads (catalog.h): every tp1d entry up to the degree gets one twin per
// position, that position holding about half an even share; the default catalog has none.
TEST(Catalog, UnevenHeadsAddALightPositionTwinPerRank) {
  const ModelSpec m = ModelSpec::gpt(/*layers=*/1, /*hidden=*/5120, /*heads=*/40, /*seq=*/2048,
                                     /*micro_batch=*/4, /*global_batch=*/16);
  const StrategyCatalog plain(m, 32);
  CatalogOptions o;
  o.uneven_heads_max_degree = 8;
  const StrategyCatalog c(m, 32, o);
  for (const Strategy& s : plain.entries()) {
    EXPECT_FALSE(s.uneven()) << s.to_string();
    EXPECT_GE(c.index_of(s), 0) << s.to_string() << ": the even entries stay";
  }
  const int twin = c.index_of(Strategy::parse("tp1d(t=8,heads=6/6/6/5/5/2/5/5)"));
  ASSERT_GE(twin, 0);  // position 5 light: max(1, 40 / 16) = 2 heads
  EXPECT_TRUE(c.shape_mask(BlockKind::kAttention)[twin]);
  EXPECT_TRUE(c.shape_mask(BlockKind::kMlp)[twin]);
  int uneven = 0;
  for (const Strategy& s : c.entries()) {
    if (!s.uneven()) continue;
    ++uneven;
    EXPECT_LE(s.t, 8) << s.to_string();
    EXPECT_EQ(Strategy::parse(s.to_string()), s);
    const std::vector<int>& h = s.heads();
    int sum = 0, light = 0;
    for (int i = 0; i < s.t; ++i) {
      sum += h[i];
      if (h[i] < h[light]) light = i;
    }
    EXPECT_EQ(sum, m.heads) << s.to_string();
    EXPECT_LT(h[light] * s.t, m.heads) << s.to_string() << ": the light rank holds less than even";
  }
  // tp1d t = 2, 4, 8, with and without sp: 2·(2 + 4 + 8) twins, times chunks {1, 2} and recompute.
  EXPECT_EQ(uneven, 2 * (2 + 4 + 8) * 2 * 2);
  EXPECT_EQ(light_position_heads(40, 8, 5), (std::vector<int>{6, 6, 6, 5, 5, 2, 5, 5}));
  EXPECT_TRUE(light_position_heads(8, 8, 0).empty());  // one head each: none to shed
  EXPECT_TRUE(light_position_heads(4, 8, 0).empty());  // fewer heads than ranks
}

TEST(Megatron, PlanUsesGpusPerNodeReducedToDivideHeads) {
  ModelSpec m;
  m.layers = 2;
  m.heads = 12;
  m.hidden = 768;
  ClusterSpec c;
  c.devices = {{"gpu", 1e14, 8e10, 2e12, 50, 300}};
  c.links = {{"nvl", 3e11, 1e-6, 0}, {"ib", 1.25e10, 5e-6, 0}};
  c.nodes = {{"gpu", 8, "nvl"}, {"gpu", 8, "nvl"}};
  c.inter_link = "ib";
  EXPECT_EQ(megatron_plan(m, c).blocks[0], Strategy::tp1d(4));  // 8 ∤ 12 → 4
  m.heads = 16;
  m.hidden = 1024;
  EXPECT_EQ(megatron_plan(m, c, true).blocks[1], Strategy::tp1d(8, true));
}

}  // namespace
}  // namespace shardgym
