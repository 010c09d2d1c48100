// α–β cost of one collective over one rank group (DESIGN.md §3–§4, "Communication").
//
// A group is reduced to what the cost depends on: its size, how many nodes it spans, the most
// ranks it has on one node, and the bottleneck (lowest bandwidth, highest latency) of its
// intra-node and inter-node links, with the scenario's bandwidth factors applied.
//
// Inside one node a ring is used: all-reduce takes 2(p−1) steps and sends 2(p−1)/p·X bytes
// per rank, all-gather / reduce-scatter (p−1) steps and (p−1)/p·X. A group spanning n nodes
// with q ranks per node runs the two-level algorithm (q parallel inter-node rings, one per
// local rank, each on its own NIC):
//   all-reduce     = RS_intra(X) + AR_inter(X/q) + AG_intra(X)
//     t = 2·[(q−1)α_a + (q−1)/q·X/B_a] + 2(n−1)α_e + 2(n−1)/n·(X/q)/B_e
//   all-gather     = AG_inter(X/q) + AG_intra(X)
//   reduce-scatter = RS_intra(X) + RS_inter(X/q)
//     t = (q−1)α_a + (q−1)/q·X/B_a + (n−1)α_e + (n−1)/n·(X/q)/B_e
// X is the full tensor in bytes (all-reduce in/out, all-gather out, reduce-scatter in).
#pragma once

#include <vector>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/cost.h"

namespace shardgym {

struct GroupLinks {
  int size = 1;
  int nodes = 1;     // nodes the group spans
  int per_node = 1;  // most group ranks on one node (q)
  double intra_bw = 0, intra_lat = 0;  // bottleneck between group ranks of the same node
  double inter_bw = 0, inter_lat = 0;  // bottleneck between group ranks of different nodes
  int intra_link = -1, inter_link = -1;  // link-class indices of those bottlenecks
  bool operator==(const GroupLinks& o) const;
};

// Link bandwidths as the scenario has them now: matrix bandwidth × factor[link class].
struct LinkState {
  CommMatrix matrix;
  std::vector<int> node;        // node of each rank
  std::vector<double> factor;   // per ClusterSpec::links entry
  double bw(int i, int j) const {
    const int l = matrix.link_of(i, j);
    return matrix.bw(i, j) * (l >= 0 ? factor[l] : 1.0);
  }
  double lat(int i, int j) const { return matrix.lat(i, j); }
};

LinkState make_link_state(const ClusterSpec& cluster, const std::vector<double>& factor);

// `ranks`: the members of one group (any order, no duplicates).
GroupLinks describe_group(const std::vector<int>& ranks, const LinkState& links);

// Seconds for one collective over the group; 0 for a group of one rank.
double collective_time(CollOp op, double bytes, const GroupLinks& g);

// Bytes one rank sends over intra-node and inter-node links during the collective.
struct LinkBytes {
  double intra = 0, inter = 0;
};
LinkBytes collective_link_bytes(CollOp op, double bytes, const GroupLinks& g);

// The distinct groups of `axis` for a strategy over the world, each with how many such
// groups exist (for energy: every group's ranks send).
struct GroupShape {
  GroupLinks links;
  int count = 0;
};
std::vector<GroupShape> group_shapes(const Strategy& s, CommAxis axis, const LinkState& links);

}  // namespace shardgym
