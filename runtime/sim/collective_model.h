// α–β cost of one collective over one rank group (docs/design.md §3–§4, "Communication").
//
// A group is reduced to what the cost depends on: its size, how many nodes it spans, the most
// ranks it has on one node, and the bottleneck (lowest bandwidth, highest latency) of its
// intra-node and inter-node links, with the scenario's bandwidth factors applied.
//
// NCCL's ring, as nccl-tests measures it: all-reduce takes 2(p−1) steps and sends 2(p−1)/p·X
// bytes per rank, all-gather / reduce-scatter (p−1) steps and (p−1)/p·X:
//   t = steps·α + steps/p·X/B_bus
// B_bus is the bus bandwidth nccl-tests reports for large messages: the link bandwidth times
// the link class's `bus_efficiency` (A100 NVLink 3: 235 of 300 GB/s, table C of
// docs/published-runs.md). Messages below the link's `bulk_bytes` use NCCL's LL128
// protocol: the small-message latency `latency_s` per step and 120/128 of B_bus (LL128 carries
// 120 data bytes in 128); from `bulk_bytes` on, the bulk (Simple) protocol with its larger
// per-step latency `bulk_latency_s`. Both latencies and the switch come from the nccl-tests
// all-reduce size sweep (docs/simulator-fidelity.md).
// A network link without nccl-tests figures (bus_efficiency 1, no bulk size) keeps the
// two-level α–β model: RS_intra(X) + AR_inter(X/q) + AG_intra(X) for an all-reduce.
// A group spanning n nodes with q ranks on each runs one ring through all of them; with one
// NIC per GPU (rails) each node's q ranks drive q NICs, so the ring's bus bandwidth is
//   B_bus = min(eff_a·B_a, eff_e·B_e·q)       (q = 1: eff_e·B_e)
// and each step costs the inter-node latency (NCCL's tuning model: a ring step that crosses
// the network pays the network's latency). DGX H100, 4 nodes: min(0.82·450, 0.93·50·8) = 369
// GB/s against 370 measured (table C).
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
  // Of those link classes: bus efficiency, bulk-protocol latency and the size it starts at.
  double intra_eff = 1, inter_eff = 1;
  double intra_bulk_lat = 0, inter_bulk_lat = 0;
  double intra_bulk_bytes = 0, inter_bulk_bytes = 0;
  bool operator==(const GroupLinks& o) const;
};

// Link bandwidths as the scenario has them now: the link class's bandwidth × factor[class].
// Computed per pair from node membership (as ClusterSpec::comm_matrix() would give), so that
// thousands of ranks cost O(ranks) memory, not a dense P×P matrix.
struct LinkState {
  int world = 0;
  std::vector<LinkClass> classes;  // ClusterSpec::links
  std::vector<int> node;           // node of each rank
  std::vector<int> intra;          // intra-node link class of each node (-1: none)
  int inter = -1;                  // link class between nodes
  std::vector<double> factor;      // per ClusterSpec::links entry
  int link_of(int i, int j) const {
    if (i == j) return -1;
    return node[i] == node[j] ? intra[node[i]] : inter;
  }
  double bw(int i, int j) const {
    const int l = link_of(i, j);
    return l >= 0 ? classes[l].bandwidth * factor[l] : 0.0;
  }
  double lat(int i, int j) const {
    const int l = link_of(i, j);
    return l >= 0 ? classes[l].latency_s : 0.0;
  }
  // One stage-to-stage transfer between i and j (LinkClass::p2p_latency_s, p2p_bandwidth):
  // α + bytes / B under the link's current factor; 0 on the same rank.
  double p2p_time(int i, int j, double bytes) const {
    const int l = link_of(i, j);
    if (l < 0) return 0.0;
    const LinkClass& c = classes[l];
    const double bw = c.p2p_bandwidth > 0 ? c.p2p_bandwidth * factor[l]
                                          : c.bandwidth * factor[l] * c.bus_efficiency;
    return (c.p2p_latency_s >= 0 ? c.p2p_latency_s : c.latency_s) + (bw > 0 ? bytes / bw : 0.0);
  }
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
// `context`: the size of a kContext group (cost.h comm_group).
std::vector<GroupShape> group_shapes(const Strategy& s, CommAxis axis, const LinkState& links,
                                     int context = 1);

}  // namespace shardgym
