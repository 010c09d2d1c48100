// The per-block cost breakdown behind `shardgym cost` (cost_report.h).
#include <gtest/gtest.h>

#include "runtime/sim/cost_report.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

ExperimentSpec spec() {
  return testing::experiment(testing::gpt(2, 2048, 16, 1024, 1),
                             testing::cluster(2, 4, testing::h100_sxm(), testing::nvswitch()));
}

TEST(CostReport, BlocksAddUpToTheIteration) {
  const Plan plan = Plan::parse("tp1d(t=4);tp2d(d1=2,d2=2,first=col);dp;tp1d(t=8,sp=1)", 4);
  const CostReport r = make_cost_report(spec(), plan);
  ASSERT_EQ(r.blocks.size(), 4u);
  double sum = r.redistribution_s + r.head_s;
  for (const auto& b : r.blocks) sum += b.fwd_s + b.bwd_s + b.comm_s;
  // Same terms summed in a different order: rounding only.
  EXPECT_NEAR(sum, r.step_latency_s, 1e-12 * r.step_latency_s);
  EXPECT_GT(r.redistribution_s, 0);  // neighbouring layouts differ
  EXPECT_EQ(r.blocks[2].strategy, "dp");
  EXPECT_GT(r.blocks[2].grad_sync_s, 0);   // 8 replicas sync gradients
  EXPECT_TRUE(r.blocks[0].collectives.size() >= 2);
  for (const auto& c : r.blocks[1].collectives) EXPECT_TRUE(c.axis == "d1" || c.axis == "d2" || c.axis == "dp");
  EXPECT_EQ(r.world, 8);
  EXPECT_FALSE(r.oom);
}

TEST(CostReport, RendersJsonAndTable) {
  const CostReport r = make_cost_report(spec(), Plan::parse("uniform:tp1d(t=4)", 4));
  const std::string json = to_json(r);
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"step_latency_s\":"), std::string::npos);
  EXPECT_NE(json.find("\"op\":\"all_reduce\""), std::string::npos);
  EXPECT_NE(json.find("\"energy_source\":\"model\""), std::string::npos);
  int depth = 0;
  for (char c : json) depth += c == '{' || c == '[' ? 1 : c == '}' || c == ']' ? -1 : 0;
  EXPECT_EQ(depth, 0);
  const std::string table = to_table(r, false);
  EXPECT_NE(table.find("tp1d(t=4)"), std::string::npos);
  EXPECT_NE(table.find("iteration"), std::string::npos);
  EXPECT_THROW(make_cost_report(spec(), Plan::parse("uniform:tp1d(t=3)", 4)), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
