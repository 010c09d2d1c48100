#include <gtest/gtest.h>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/scenario.h"

namespace shardgym {
namespace {

ClusterSpec two_nodes() {
  ClusterSpec c;
  c.devices = {{"h100", 9.89e14, 8e10, 3.35e12, 70, 700}, {"a100", 3.12e14, 8e10, 2e12, 50, 400}};
  c.links = {{"nvswitch", 4.5e11, 2e-6, 0}, {"ib", 1.25e10, 5e-6, 0}};
  c.nodes = {{"h100", 4, "nvswitch"}, {"a100", 4, "nvswitch"}};
  c.inter_link = "ib";
  return c;
}

TEST(Cluster, CommMatrixIsHierarchical) {
  const ClusterSpec c = two_nodes();
  ASSERT_EQ(c.validate(), "");
  const CommMatrix m = c.comm_matrix();
  EXPECT_EQ(m.world, 8);
  EXPECT_DOUBLE_EQ(m.bw(0, 3), 4.5e11);
  EXPECT_DOUBLE_EQ(m.bw(3, 4), 1.25e10);
  EXPECT_DOUBLE_EQ(m.lat(7, 0), 5e-6);
  EXPECT_EQ(m.link_of(1, 2), 0);
  EXPECT_EQ(m.link_of(1, 6), 1);
  EXPECT_EQ(m.link_of(2, 2), -1);
  EXPECT_EQ(c.device_of(5).name, "a100");
  EXPECT_EQ(c.node_of(4), 1);
}

TEST(Cluster, ValidateNamesTheProblem) {
  ClusterSpec c = two_nodes();
  c.nodes[1].device = "v100";
  EXPECT_NE(c.validate().find("unknown device 'v100'"), std::string::npos);
  c = two_nodes();
  c.inter_link = "eth";
  EXPECT_NE(c.validate().find("inter_link"), std::string::npos);
  c = two_nodes();
  c.nodes[0].gpus = 0;
  EXPECT_NE(c.validate().find("gpus must be positive"), std::string::npos);
}

// The one fold of a scenario's events that every backend reads: a later event of the same
// kind and target replaces an earlier one, a rank_join undoes its rank's loss, nothing past
// `step` counts, the list's order within a step is kept, and an event naming a link or rank
// the cluster lacks changes nothing.
TEST(Cluster, ScenarioStateFoldsTheEventsUpToAStep) {
  const ClusterSpec c = two_nodes();
  auto event = [](int step, EventKind kind, int rank, double factor, std::string target = "",
                  int value = 0) {
    ScenarioEvent e;
    e.step = step, e.kind = kind, e.rank = rank, e.factor = factor, e.target = target;
    e.value = value;
    return e;
  };
  Scenario s;
  s.events = {event(5, EventKind::kLinkBandwidth, -1, 0.25, "ib"),
              event(2, EventKind::kStraggler, 3, 2.0),
              event(2, EventKind::kStraggler, 3, 1.5),  // same step, later in the list: wins
              event(4, EventKind::kRankLoss, 6, 1.0),
              event(7, EventKind::kRankJoin, 6, 1.0),
              event(6, EventKind::kSeqLength, -1, 1.0, "", 4096),
              event(6, EventKind::kBatch, -1, 1.0, "", 512),
              event(3, EventKind::kStraggler, 99, 9.0),  // no such rank
              event(3, EventKind::kLinkBandwidth, -1, 9.0, "no-such-link")};
  const ScenarioState at1 = s.state_at(1, c);
  EXPECT_EQ(at1.slowdown, std::vector<double>(8, 1.0));
  EXPECT_EQ(at1.link_factor, (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(at1.lost, std::vector<uint8_t>(8, 0));
  EXPECT_EQ(at1.seq, 0);
  const ScenarioState at4 = s.state_at(4, c);
  EXPECT_EQ(at4.slowdown, (std::vector<double>{1, 1, 1, 1.5, 1, 1, 1, 1}));
  EXPECT_EQ(at4.lost, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(at4.link_factor, (std::vector<double>{1.0, 1.0}));
  const ScenarioState at6 = s.state_at(6, c);
  EXPECT_EQ(at6.link_factor, (std::vector<double>{1.0, 0.25}));
  EXPECT_EQ(at6.seq, 4096);
  EXPECT_EQ(at6.global_batch, 512);
  EXPECT_EQ(at6.lost[6], 1);
  EXPECT_EQ(s.state_at(7, c).lost, std::vector<uint8_t>(8, 0));
}

}  // namespace
}  // namespace shardgym
