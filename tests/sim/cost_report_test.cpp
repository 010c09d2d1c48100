// The per-block cost breakdown behind `shardgym cost` (cost_report.h).
#include <gtest/gtest.h>

#include <algorithm>

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


// The host's time to issue a micro-batch is printed beside the micro-batch's time, and the
// report says which of the two sets it; no host figure, no line.
TEST(CostReport, SaysWhenTheHostBoundsAMicroBatch) {
  ExperimentSpec slow_host = spec();
  slow_host.cluster.devices[0].host_kernel_s = 1e-3;  // far slower than these GEMMs
  const CostReport r = make_cost_report(slow_host, Plan::parse("uniform:tp1d(t=4)", 4));
  ASSERT_FALSE(r.stage_reports.empty());
  EXPECT_GT(r.stage_reports[0].host_s, 0);
  EXPECT_NEAR(r.stage_reports[0].micro_batch_s, r.stage_reports[0].host_s, 1e-12);
  const std::string table = to_table(r, false);
  EXPECT_NE(table.find("host issue"), std::string::npos) << table;
  EXPECT_NE(table.find("bound by its host"), std::string::npos) << table;
  EXPECT_NE(to_json(r).find("\"host_s\":"), std::string::npos);
  const CostReport free = make_cost_report(spec(), Plan::parse("uniform:tp1d(t=4)", 4));
  EXPECT_EQ(to_table(free, false).find("host issue"), std::string::npos);
}

TEST(CostReport, StagesOfAPipelinedPlan) {
  const Plan plan = Plan::parse("uniform:tp1d(t=2)@pp(p=2,m=4)", 4);
  const CostReport r = make_cost_report(spec(), plan);
  ASSERT_EQ(r.stage_reports.size(), 2u);
  EXPECT_EQ(r.stages, 2);
  EXPECT_EQ(r.micro_batches, 4);
  EXPECT_EQ(r.schedule, "1f1b");
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 1.0 / 5.0);  // (p−1)/(m+p−1)
  const StageReport &s0 = r.stage_reports[0], &s1 = r.stage_reports[1];
  EXPECT_EQ(s0.first_block, 0);
  EXPECT_EQ(s0.blocks, 2);
  EXPECT_EQ(s1.first_block, 2);
  EXPECT_EQ(s1.first_rank, 4);
  EXPECT_EQ(s1.ranks, 4);
  EXPECT_EQ(r.blocks[1].stage, 0);
  EXPECT_EQ(r.blocks[2].stage, 1);
  EXPECT_DOUBLE_EQ(s0.in_flight, 2);  // 1F1B: min(m, p − s)
  EXPECT_DOUBLE_EQ(s1.in_flight, 1);
  // A stage's micro-batch holds its blocks' compute; the last one also the LM head.
  for (const auto& st : r.stage_reports) {
    double blocks = 0;
    for (int b = st.first_block; b < st.first_block + st.blocks; ++b)
      blocks += (r.blocks[b].fwd_s + r.blocks[b].bwd_s) / r.micro_batches;
    EXPECT_GE(st.micro_batch_s, blocks * (1 - 1e-12));
  }
  EXPECT_GT(s1.micro_batch_s, s0.micro_batch_s);
  // 1F1B: m · the slowest stage + the others' fill and drain (pipeline_model.h).
  const double slow = std::max(s0.micro_batch_s, s1.micro_batch_s);
  const double fast = std::min(s0.micro_batch_s, s1.micro_batch_s);
  EXPECT_NEAR(r.schedule_s, 4 * slow + fast, 1e-12 * r.schedule_s);
  EXPECT_GT(r.p2p_s, 0);
  EXPECT_NEAR(r.schedule_s + r.p2p_s + r.tail_s, r.step_latency_s, 1e-12 * r.step_latency_s);
  EXPECT_DOUBLE_EQ(std::max(s0.peak_memory_bytes, s1.peak_memory_bytes), r.peak_memory_bytes);
  const std::string table = to_table(r, false);
  EXPECT_NE(table.find("pipeline       2 stages, 4 micro-batches, 1f1b"), std::string::npos);
  EXPECT_NE(to_json(r).find("\"stages\":[{\"stage\":0"), std::string::npos);
}

// A stage-to-stage transfer takes its link's own point-to-point figures where the link has
// them (a calibration's stage boundaries timed alone), else the ring step's. The boundary of
// this plan crosses the nodes' link, which nothing else in it uses: stating the ring step's
// figures as the link's p2p ones leaves the step to the bit, and a slower p2p latency adds
// to the transfers only.
TEST(CostReport, StageTransfersTakeTheLinksPointToPointFigures) {
  const Plan plan = Plan::parse("uniform:tp1d(t=4)@pp(p=2,m=4)", 4);
  const CostReport base = make_cost_report(spec(), plan);
  ExperimentSpec same = spec();
  LinkClass& ib = same.cluster.links[1];
  ASSERT_EQ(ib.name, same.cluster.inter_link);
  ib.p2p_latency_s = ib.latency_s;
  ib.p2p_bandwidth = ib.bandwidth * ib.bus_efficiency;
  const CostReport stated = make_cost_report(same, plan);
  EXPECT_EQ(stated.step_latency_s, base.step_latency_s);
  EXPECT_EQ(stated.p2p_s, base.p2p_s);
  ExperimentSpec slow = same;
  slow.cluster.links[1].p2p_latency_s += 1e-3;
  const CostReport r = make_cost_report(slow, plan);
  EXPECT_EQ(r.schedule_s, base.schedule_s);
  // 1F1B over 2 stages waits on at least the fill's and the drain's transfer (one each way).
  EXPECT_GE(r.p2p_s - base.p2p_s, 2e-3 * (1 - 1e-9));
  EXPECT_EQ(r.step_latency_s - r.p2p_s, base.step_latency_s - base.p2p_s);
}

}  // namespace
}  // namespace shardgym
