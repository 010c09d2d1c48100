// α–β collective costs against their closed forms (collective_model.h).
// Tolerance: a handful of double operations on values of similar magnitude: 1e-12 relative.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/sim/collective_model.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

constexpr double kRel = 1e-12;
using testing::cluster;

std::vector<int> range(int lo, int hi) {
  std::vector<int> v(hi - lo);
  std::iota(v.begin(), v.end(), lo);
  return v;
}

TEST(CollectiveModel, RingInsideOneNode) {
  const ClusterSpec c = cluster(1, 8, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  const GroupLinks g = describe_group(range(0, 8), links);
  EXPECT_EQ(g.nodes, 1);
  EXPECT_EQ(g.per_node, 8);
  const double x = 64e6, a = 3e-6, b = 450e9;
  const double ar = 14 * a + 2.0 * 7 / 8 * x / b;
  const double ag = 7 * a + 7.0 / 8 * x / b;
  EXPECT_NEAR(collective_time(CollOp::kAllReduce, x, g), ar, kRel * ar);
  EXPECT_NEAR(collective_time(CollOp::kAllGather, x, g), ag, kRel * ag);
  EXPECT_NEAR(collective_time(CollOp::kReduceScatter, x, g), ag, kRel * ag);
  EXPECT_NEAR(collective_link_bytes(CollOp::kAllReduce, x, g).intra, 2.0 * 7 / 8 * x, kRel * x);
  EXPECT_EQ(collective_time(CollOp::kAllReduce, x, describe_group({3}, links)), 0.0);
}

TEST(CollectiveModel, HierarchicalTwoNodeGroupMatchesClosedForm) {
  const ClusterSpec c = cluster(2, 8, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  const GroupLinks g = describe_group(range(0, 16), links);
  ASSERT_EQ(g.nodes, 2);
  ASSERT_EQ(g.per_node, 8);
  const double x = 128e6, aa = 3e-6, ba = 450e9, ae = 5e-6, be = 50e9;
  const double q = 8, n = 2;
  // RS inside the node, AR of the X/q shard between the two nodes, AG inside the node.
  const double ar = 2 * ((q - 1) * aa + (q - 1) / q * x / ba) + 2 * (n - 1) * ae +
                    2 * (n - 1) / n * (x / q) / be;
  const double ag = (q - 1) * aa + (q - 1) / q * x / ba + (n - 1) * ae + (n - 1) / n * (x / q) / be;
  EXPECT_NEAR(collective_time(CollOp::kAllReduce, x, g), ar, kRel * ar);
  EXPECT_NEAR(collective_time(CollOp::kAllGather, x, g), ag, kRel * ag);
  EXPECT_NEAR(collective_time(CollOp::kReduceScatter, x, g), ag, kRel * ag);
  // The hierarchical all-reduce beats a flat ring over the inter-node bottleneck.
  const double flat = 30 * ae + 2.0 * 15 / 16 * x / be;
  EXPECT_LT(ar, flat);
  const LinkBytes lb = collective_link_bytes(CollOp::kAllReduce, x, g);
  EXPECT_NEAR(lb.inter, x / q, kRel * x);
  EXPECT_NEAR(lb.intra, 2 * (q - 1) / q * x, kRel * x);
}

TEST(CollectiveModel, DataParallelGroupsAcrossNodesUseTheInterLink) {
  const ClusterSpec c = cluster(2, 8, testing::h100_sxm(), testing::nvswitch());
  const LinkState links = make_link_state(c, {1.0, 1.0});
  // tp1d(t=8): the data-parallel groups are {r, r+8}: one rank per node.
  const auto shapes = group_shapes(Strategy::tp1d(8), CommAxis::kData, links);
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].count, 8);
  EXPECT_EQ(shapes[0].links.per_node, 1);
  const double x = 1e9;
  const double expected = 2 * 5e-6 + x / 50e9;
  EXPECT_NEAR(collective_time(CollOp::kAllReduce, x, shapes[0].links), expected, kRel * expected);
}

TEST(CollectiveModel, LinkFactorScalesOnlyItsClass) {
  const ClusterSpec c = cluster(2, 8, testing::h100_sxm(), testing::nvswitch());
  const LinkState nominal = make_link_state(c, {1.0, 1.0});
  const LinkState slow_ib = make_link_state(c, {1.0, 0.25});
  const GroupLinks in_node = describe_group(range(0, 8), slow_ib);
  EXPECT_EQ(collective_time(CollOp::kAllReduce, 1e8, in_node),
            collective_time(CollOp::kAllReduce, 1e8, describe_group(range(0, 8), nominal)));
  const GroupLinks across = describe_group({0, 8}, slow_ib);
  EXPECT_DOUBLE_EQ(across.inter_bw, 12.5e9);
}

TEST(CollectiveModel, HeterogeneousNodesUseTheSlowestIntraLink) {
  ClusterSpec c = cluster(2, 4, testing::h100_sxm(), testing::nvswitch());
  c.links.push_back(testing::pcie4());
  c.nodes[1].intra_link = "pcie4";
  const LinkState links = make_link_state(c, {1.0, 1.0, 1.0});
  const GroupLinks g = describe_group(range(0, 8), links);
  EXPECT_DOUBLE_EQ(g.intra_bw, 25e9);
  EXPECT_EQ(g.intra_link, 2);
  EXPECT_DOUBLE_EQ(g.intra_lat, 10e-6);
}

}  // namespace
}  // namespace shardgym
