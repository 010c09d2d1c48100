#include "runtime/sim/collective_model.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>
#include <stdexcept>
#include <string>

namespace shardgym {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// LL128 carries 120 data bytes in every 128 (NCCL src/device/prims_ll128.h).
constexpr double kLL128Payload = 120.0 / 128.0;

// One ring over p ranks: `steps` latency hops and steps/p·X bytes sent per rank, at bus
// bandwidth `bus` (B/s) in the bulk protocol, or LL128 below `bulk_bytes`.
double ring(double p, bool all_reduce, double bytes, double bus, double lat, double bulk_lat,
            double bulk_bytes) {
  if (p <= 1) return 0;
  if (!(bus > 0)) throw std::invalid_argument("collective over a link of zero bandwidth");
  const double steps = all_reduce ? 2 * (p - 1) : p - 1;
  if (bytes < bulk_bytes) return steps * lat + steps / p * bytes / (bus * kLL128Payload);
  return steps * bulk_lat + steps / p * bytes / bus;
}

}  // namespace

bool GroupLinks::operator==(const GroupLinks& o) const {
  return size == o.size && nodes == o.nodes && per_node == o.per_node &&
         intra_bw == o.intra_bw && intra_lat == o.intra_lat && inter_bw == o.inter_bw &&
         inter_lat == o.inter_lat && intra_link == o.intra_link && inter_link == o.inter_link &&
         intra_eff == o.intra_eff && inter_eff == o.inter_eff &&
         intra_bulk_lat == o.intra_bulk_lat && inter_bulk_lat == o.inter_bulk_lat &&
         intra_bulk_bytes == o.intra_bulk_bytes && inter_bulk_bytes == o.inter_bulk_bytes;
}

LinkState make_link_state(const ClusterSpec& cluster, const std::vector<double>& factor) {
  LinkState s;
  s.world = cluster.world_size();
  s.node.reserve(s.world);
  for (int n = 0; n < cluster.num_nodes(); ++n) {
    for (int g = 0; g < cluster.nodes[n].gpus; ++g) s.node.push_back(n);
    s.intra.push_back(cluster.link_index(cluster.nodes[n].intra_link));
  }
  s.inter = cluster.link_index(cluster.inter_link);
  s.factor = factor;
  s.factor.resize(cluster.links.size(), 1.0);
  s.classes = cluster.links;
  return s;
}

GroupLinks describe_group(const std::vector<int>& ranks, const LinkState& links) {
  GroupLinks g;
  g.size = static_cast<int>(ranks.size());
  // O(ranks): every pair of ranks on one node meets that node's intra-node class and every
  // pair across nodes the inter-node class, so the bottlenecks follow from each node's member
  // count. The class kept on a tie is that of the first pair in (a, b) order, as a loop over
  // all pairs would keep it: the node whose first member comes first.
  struct Member {
    int count = 0;
    size_t first = 0;
  };
  std::unordered_map<int, Member> per_node;
  per_node.reserve(std::min<size_t>(ranks.size(), links.intra.size()));
  for (size_t a = 0; a < ranks.size(); ++a) {
    const int r = ranks[a];
    if (r < 0 || r >= static_cast<int>(links.node.size()))
      throw std::out_of_range("describe_group: rank " + std::to_string(r) + " outside the world");
    auto [it, added] = per_node.try_emplace(links.node[r]);
    if (added) it->second.first = a;
    ++it->second.count;
  }
  g.nodes = static_cast<int>(per_node.size());
  double intra = kInf, inter = kInf;
  size_t intra_first = 0;
  for (const auto& [node, m] : per_node) {
    g.per_node = std::max(g.per_node, m.count);
    if (m.count < 2) continue;
    const int l = links.intra[node];
    const double bw = l >= 0 ? links.classes[l].bandwidth * links.factor[l] : 0.0;
    const double lat = l >= 0 ? links.classes[l].latency_s : 0.0;
    if (bw < intra || (bw == intra && m.first < intra_first)) {
      intra = bw;
      intra_first = m.first;
      g.intra_link = l;
    }
    g.intra_lat = std::max(g.intra_lat, lat);
  }
  if (per_node.size() > 1) {
    const int l = links.inter;
    inter = l >= 0 ? links.classes[l].bandwidth * links.factor[l] : 0.0;
    g.inter_link = l;
    g.inter_lat = std::max(0.0, l >= 0 ? links.classes[l].latency_s : 0.0);
    if (!(inter < kInf)) g.inter_link = -1;
  }
  g.intra_bw = intra == kInf ? 0 : intra;
  g.inter_bw = inter == kInf ? 0 : inter;
  auto protocol = [&](int link, double lat, double& eff, double& bulk_lat, double& bulk_bytes) {
    bulk_lat = lat;
    if (link < 0 || link >= static_cast<int>(links.classes.size())) return;
    const LinkClass& c = links.classes[link];
    eff = c.bus_efficiency;
    bulk_bytes = c.bulk_bytes;
    // The bulk latency scales with the group's worst latency as the small-message one does.
    if (c.bulk_latency_s >= 0 && c.latency_s > 0) bulk_lat = lat * c.bulk_latency_s / c.latency_s;
    else if (c.bulk_latency_s >= 0) bulk_lat = c.bulk_latency_s;
  };
  protocol(g.intra_link, g.intra_lat, g.intra_eff, g.intra_bulk_lat, g.intra_bulk_bytes);
  protocol(g.inter_link, g.inter_lat, g.inter_eff, g.inter_bulk_lat, g.inter_bulk_bytes);
  return g;
}

double collective_time(CollOp op, double bytes, const GroupLinks& g) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const bool ar = op == CollOp::kAllReduce;
  if (g.nodes <= 1)
    return ring(g.size, ar, bytes, g.intra_bw * g.intra_eff, g.intra_lat, g.intra_bulk_lat,
                g.intra_bulk_bytes);
  if (g.inter_eff >= 1 && g.inter_bulk_bytes <= 0) {
    // No nccl-tests figures for the network: the two-level α–β model (RS, AR over nodes, AG).
    const double q = g.per_node, n = g.nodes;
    const double intra = ring(q, false, bytes, g.intra_bw * g.intra_eff, g.intra_lat,
                              g.intra_bulk_lat, g.intra_bulk_bytes);
    const double inter = ring(n, ar, bytes / q, g.inter_bw, g.inter_lat, g.inter_lat, 0);
    return ar ? 2 * intra + inter : intra + inter;
  }
  // One ring through every node; q rails per node carry its inter-node traffic.
  double bus = g.inter_eff * g.inter_bw * g.per_node;
  if (g.per_node > 1) bus = std::min(bus, g.intra_eff * g.intra_bw);
  return ring(g.size, ar, bytes, bus, g.inter_lat, g.inter_bulk_lat, g.inter_bulk_bytes);
}

LinkBytes collective_link_bytes(CollOp op, double bytes, const GroupLinks& g) {
  LinkBytes out;
  if (g.size <= 1 || bytes <= 0) return out;
  const bool ar = op == CollOp::kAllReduce;
  if (g.nodes <= 1) {
    out.intra = (ar ? 2.0 : 1.0) * (g.size - 1) / g.size * bytes;
    return out;
  }
  if (g.inter_eff >= 1 && g.inter_bulk_bytes <= 0) {  // the two-level model (collective_time)
    const double q = g.per_node, n = g.nodes;
    out.intra = (ar ? 2.0 : 1.0) * (q - 1) / q * bytes;
    out.inter = (ar ? 2.0 : 1.0) * (n - 1) / n * bytes / q;
    return out;
  }
  // The ring's p hops: n cross nodes, p − n stay inside one; every hop carries the same bytes.
  const double p = g.size, n = g.nodes;
  const double sent = (ar ? 2.0 : 1.0) * (p - 1) / p * bytes;
  out.intra = sent * (p - n) / p;
  out.inter = sent * n / p;
  return out;
}

std::vector<GroupShape> group_shapes(const Strategy& s, CommAxis axis, const LinkState& links,
                                     int context) {
  std::vector<GroupShape> out;
  const int world = links.world;
  std::vector<uint8_t> seen(world, 0);
  for (int r = 0; r < world; ++r) {
    if (seen[r]) continue;
    const std::vector<int> ranks = comm_group(s, axis, r, world, context);
    for (int q : ranks) seen[q] = 1;
    const GroupLinks g = describe_group(ranks, links);
    auto it = std::find_if(out.begin(), out.end(), [&](const GroupShape& x) { return x.links == g; });
    if (it == out.end()) out.push_back({g, 1});
    else ++it->count;
  }
  return out;
}

}  // namespace shardgym
