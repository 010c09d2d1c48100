#include "runtime/sim/collective_model.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace shardgym {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One ring over p ranks: `steps` latency hops and `frac`·X bytes sent per rank.
double ring(double p, bool all_reduce, double bytes, double bw, double lat) {
  if (p <= 1) return 0;
  if (!(bw > 0)) throw std::invalid_argument("collective over a link of zero bandwidth");
  const double steps = all_reduce ? 2 * (p - 1) : p - 1;
  return steps * lat + steps / p * bytes / bw;
}

}  // namespace

bool GroupLinks::operator==(const GroupLinks& o) const {
  return size == o.size && nodes == o.nodes && per_node == o.per_node &&
         intra_bw == o.intra_bw && intra_lat == o.intra_lat && inter_bw == o.inter_bw &&
         inter_lat == o.inter_lat && intra_link == o.intra_link && inter_link == o.inter_link;
}

LinkState make_link_state(const ClusterSpec& cluster, const std::vector<double>& factor) {
  LinkState s;
  s.matrix = cluster.comm_matrix();
  s.node.resize(s.matrix.world);
  for (int r = 0; r < s.matrix.world; ++r) s.node[r] = cluster.node_of(r);
  s.factor = factor;
  s.factor.resize(cluster.links.size(), 1.0);
  return s;
}

GroupLinks describe_group(const std::vector<int>& ranks, const LinkState& links) {
  GroupLinks g;
  g.size = static_cast<int>(ranks.size());
  std::map<int, int> per_node;
  for (int r : ranks) ++per_node[links.node[r]];
  g.nodes = static_cast<int>(per_node.size());
  for (const auto& [node, count] : per_node) g.per_node = std::max(g.per_node, count);
  double intra = kInf, inter = kInf;
  for (size_t a = 0; a < ranks.size(); ++a) {
    for (size_t b = a + 1; b < ranks.size(); ++b) {
      const int i = ranks[a], j = ranks[b];
      const double bw = std::min(links.bw(i, j), links.bw(j, i));
      const double lat = std::max(links.lat(i, j), links.lat(j, i));
      const bool same = links.node[i] == links.node[j];
      double& best = same ? intra : inter;
      if (bw < best) {
        best = bw;
        (same ? g.intra_link : g.inter_link) = links.matrix.link_of(i, j);
      }
      double& worst_lat = same ? g.intra_lat : g.inter_lat;
      worst_lat = std::max(worst_lat, lat);
    }
  }
  g.intra_bw = intra == kInf ? 0 : intra;
  g.inter_bw = inter == kInf ? 0 : inter;
  return g;
}

double collective_time(CollOp op, double bytes, const GroupLinks& g) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const bool ar = op == CollOp::kAllReduce;
  if (g.nodes <= 1) return ring(g.size, ar, bytes, g.intra_bw, g.intra_lat);
  const double q = g.per_node, n = g.nodes;
  const double intra = ring(q, false, bytes, g.intra_bw, g.intra_lat);  // one RS or AG
  const double inter = ring(n, ar, bytes / q, g.inter_bw, g.inter_lat);
  return ar ? 2 * intra + inter : intra + inter;
}

LinkBytes collective_link_bytes(CollOp op, double bytes, const GroupLinks& g) {
  LinkBytes out;
  if (g.size <= 1 || bytes <= 0) return out;
  const bool ar = op == CollOp::kAllReduce;
  if (g.nodes <= 1) {
    out.intra = (ar ? 2.0 : 1.0) * (g.size - 1) / g.size * bytes;
    return out;
  }
  const double q = g.per_node, n = g.nodes;
  out.intra = (ar ? 2.0 : 1.0) * (q - 1) / q * bytes;
  out.inter = (ar ? 2.0 : 1.0) * (n - 1) / n * bytes / q;
  return out;
}

std::vector<GroupShape> group_shapes(const Strategy& s, CommAxis axis, const LinkState& links) {
  std::vector<GroupShape> out;
  const int world = links.matrix.world;
  std::vector<uint8_t> seen(world, 0);
  for (int r = 0; r < world; ++r) {
    if (seen[r]) continue;
    const std::vector<int> ranks = comm_group(s, axis, r, world);
    for (int q : ranks) seen[q] = 1;
    const GroupLinks g = describe_group(ranks, links);
    auto it = std::find_if(out.begin(), out.end(), [&](const GroupShape& x) { return x.links == g; });
    if (it == out.end()) out.push_back({g, 1});
    else ++it->count;
  }
  return out;
}

}  // namespace shardgym
