#include <gtest/gtest.h>

#include "runtime/core/cluster_spec.h"

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

}  // namespace
}  // namespace shardgym
