// α–β collective costs against their closed forms (collective_model.h).
// Tolerance: a handful of double operations on values of similar magnitude: 1e-12 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

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

// Links of `nodes` nodes of `per_node` H100s over NVSwitch, every link at full bandwidth.
LinkState h100_links(int nodes, int per_node) {
  return make_link_state(cluster(nodes, per_node, testing::h100_sxm(), testing::nvswitch()),
                         {1.0, 1.0});
}

// The group of every rank of h100_links(nodes, per_node).
GroupLinks h100_group(int nodes, int per_node) {
  return describe_group(range(0, nodes * per_node), h100_links(nodes, per_node));
}

TEST(CollectiveModel, RingInsideOneNode) {
  const GroupLinks g = h100_group(1, 8);
  EXPECT_EQ(g.nodes, 1);
  EXPECT_EQ(g.per_node, 8);
  const double x = 64e6, a = 3e-6, b = 450e9;
  const double ar = 14 * a + 2.0 * 7 / 8 * x / b;
  const double ag = 7 * a + 7.0 / 8 * x / b;
  EXPECT_NEAR(collective_time(CollOp::kAllReduce, x, g), ar, kRel * ar);
  EXPECT_NEAR(collective_time(CollOp::kAllGather, x, g), ag, kRel * ag);
  EXPECT_NEAR(collective_time(CollOp::kReduceScatter, x, g), ag, kRel * ag);
  EXPECT_NEAR(collective_link_bytes(CollOp::kAllReduce, x, g).intra, 2.0 * 7 / 8 * x, kRel * x);
  EXPECT_EQ(collective_time(CollOp::kAllReduce, x, describe_group({3}, h100_links(1, 8))), 0.0);
}

// A small all-reduce is latency-bound: 8 bytes cost the ring's 2(p − 1) steps of per-step
// latency and next to nothing for the bytes, the same as 8 KiB to within 1 %; 64 MB are
// bandwidth-bound. With nccl-tests' protocol figures (LL128 below bulk_bytes) the small message
// pays the LL128 step latency, the large one the bulk protocol's.
TEST(CollectiveModel, ASmallAllReduceIsLatencyBound) {
  for (int p : {2, 4, 8}) {
    const GroupLinks g = h100_group(1, p);
    const double steps = 2.0 * (p - 1), a = testing::nvswitch().latency_s;
    const double tiny = collective_time(CollOp::kAllReduce, 8, g);
    EXPECT_NEAR(tiny, steps * a, 1e-4 * steps * a) << "p=" << p;
    EXPECT_NEAR(collective_time(CollOp::kAllReduce, 8192, g) / tiny, 1.0, 0.01) << "p=" << p;
    EXPECT_GT(collective_time(CollOp::kAllReduce, 64e6, g), 5 * tiny) << "p=" << p;
  }
  LinkClass nv = testing::nvswitch();
  nv.bus_efficiency = 0.78, nv.latency_s = 5.7e-6, nv.bulk_latency_s = 12.5e-6;
  nv.bulk_bytes = 16.0 * (1 << 20);
  ClusterSpec c = cluster(1, 8, testing::h100_sxm(), nv);
  const GroupLinks g = describe_group(range(0, 8), make_link_state(c, {1.0, 1.0}));
  EXPECT_NEAR(collective_time(CollOp::kAllReduce, 8, g), 14 * 5.7e-6, 1e-3 * 14 * 5.7e-6);
  const double big = 1e9, bus = 450e9 * 0.78;
  EXPECT_NEAR(collective_time(CollOp::kAllReduce, big, g), 14 * 12.5e-6 + 2.0 * 7 / 8 * big / bus,
              1e-9);
}

TEST(CollectiveModel, HierarchicalTwoNodeGroupMatchesClosedForm) {
  const GroupLinks g = h100_group(2, 8);
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
  const LinkState links = h100_links(2, 8);
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

namespace shardgym {
namespace {

// describe_group counts members per node (O(ranks)); a group's bottlenecks are those of the
// loop over every pair of its ranks it replaced, tie-breaks included (the first pair in order
// keeps its link class). Random groups over nodes with three intra-node classes, two of the
// same bandwidth and latency but other efficiencies, and random link factors.
GroupLinks describe_group_by_pairs(const std::vector<int>& ranks, const LinkState& links) {
  GroupLinks g = describe_group(ranks, links);  // size, nodes, per_node, protocol below
  const double inf = std::numeric_limits<double>::infinity();
  double intra = inf, inter = inf;
  int intra_link = -1, inter_link = -1;
  double intra_lat = 0, inter_lat = 0;
  for (size_t a = 0; a < ranks.size(); ++a)
    for (size_t b = a + 1; b < ranks.size(); ++b) {
      const int i = ranks[a], j = ranks[b];
      const bool same = links.node[i] == links.node[j];
      const double bw = links.bw(i, j);
      double& best = same ? intra : inter;
      if (bw < best) best = bw, (same ? intra_link : inter_link) = links.link_of(i, j);
      double& lat = same ? intra_lat : inter_lat;
      lat = std::max(lat, links.lat(i, j));
    }
  g.intra_bw = intra == inf ? 0 : intra;
  g.inter_bw = inter == inf ? 0 : inter;
  g.intra_link = intra_link;
  g.inter_link = inter_link;
  g.intra_lat = intra_lat;
  g.inter_lat = inter_lat;
  return g;
}

TEST(CollectiveModel, DescribeGroupMatchesThePairwiseBottlenecks) {
  LinkState links;
  links.classes.resize(4);
  links.classes[0].bandwidth = 450e9, links.classes[0].latency_s = 3e-6;
  links.classes[1].bandwidth = 300e9, links.classes[1].latency_s = 4e-6;
  links.classes[2].bandwidth = 300e9, links.classes[2].latency_s = 4e-6;
  links.classes[2].bus_efficiency = 0.5;
  links.classes[3].bandwidth = 25e9, links.classes[3].latency_s = 5e-6;
  links.inter = 3;
  std::mt19937 rng(7);
  for (int n = 0; n < 12; ++n) {
    links.intra.push_back(static_cast<int>(rng() % 3));
    for (int g = 0; g < 4; ++g) links.node.push_back(n);
  }
  links.world = static_cast<int>(links.node.size());
  for (int trial = 0; trial < 2000; ++trial) {
    links.factor = {1.0, trial % 3 ? 1.0 : 1.5, 1.0, trial % 5 ? 1.0 : 0.5};
    std::vector<int> all(links.world);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(1 + rng() % links.world);
    const GroupLinks fast = describe_group(all, links);
    const GroupLinks pairs = describe_group_by_pairs(all, links);
    EXPECT_EQ(fast.intra_bw, pairs.intra_bw);
    EXPECT_EQ(fast.inter_bw, pairs.inter_bw);
    EXPECT_EQ(fast.intra_link, pairs.intra_link) << "trial " << trial;
    EXPECT_EQ(fast.inter_link, pairs.inter_link);
    EXPECT_EQ(fast.intra_lat, pairs.intra_lat);
    EXPECT_EQ(fast.inter_lat, pairs.inter_lat);
  }
}

}  // namespace
}  // namespace shardgym
