#include "runtime/sim/layout.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace shardgym {
namespace {

// Position of `rank` in its group along `axis` (groups are sorted).
int index_in(const Strategy& s, CommAxis axis, int rank, int world) {
  const std::vector<int> g = comm_group(s, axis, rank, world);
  return static_cast<int>(std::find(g.begin(), g.end(), rank) - g.begin());
}

Box box2(double r0, double r1, double c0, double c1) {
  Box b;
  b.lo[0] = r0, b.hi[0] = r1, b.lo[1] = c0, b.hi[1] = c1;
  return b;
}

// Slice i of n of [0, len).
void slice(double len, int i, int n, double& lo, double& hi) {
  lo = len * i / n;
  hi = len * (i + 1) / n;
}

double overlap(const Holding& a, const Holding& b) {
  double v = 0;
  for (int k = 0; k < a.count; ++k) v += intersect(a.parts[k], b.parts[k]).volume();
  return v;
}

double overlap3(const Holding& a, const Holding& b, const Holding& c) {
  double v = 0;
  for (int k = 0; k < a.count; ++k)
    v += intersect(intersect(a.parts[k], b.parts[k]), c.parts[k]).volume();
  return v;
}

// Rank r needs need[r], holds have[r]; sources are searched in [lo(r), hi(r)).
template <typename Range>
TransferCost transfer(const std::vector<Holding>& have, const std::vector<Holding>& need,
                      double elem_bytes, Range range, const ClusterSpec& cluster,
                      const LinkState& links) {
  TransferCost out;
  const int world = static_cast<int>(have.size());
  std::vector<uint8_t> node_seen(cluster.num_nodes(), 0);
  for (int r = 0; r < world; ++r) {
    double total = 0;
    for (int k = 0; k < need[r].count; ++k) total += need[r].parts[k].volume();
    const double missing = total - overlap(need[r], have[r]);
    if (missing <= 1e-9 * total) continue;
    double bw = std::numeric_limits<double>::infinity(), lat = 0;
    int link = -1;
    // The matrix's bandwidth and latency depend only on the pair of nodes, so one source
    // per node is enough to know the link it offers.
    std::fill(node_seen.begin(), node_seen.end(), 0);
    auto scan = [&](int lo, int hi) {
      for (int q = std::max(lo, 0); q < std::min(hi, world); ++q) {
        if (q == r || node_seen[links.node[q]]) continue;
        const double useful = overlap(have[q], need[r]);
        if (useful <= 1e-9 * total) continue;
        if (useful - overlap3(have[q], need[r], have[r]) <= 1e-9 * total) continue;
        node_seen[links.node[q]] = 1;
        const double b = links.bw(q, r);
        if (b < bw) bw = b, link = links.link_of(q, r);
        lat = std::max(lat, links.lat(q, r));
      }
    };
    const auto [lo, hi] = range(r);
    scan(lo, hi);
    if (link < 0) scan(0, world);  // not found nearby: any holder
    const double bytes = missing * elem_bytes;
    out.bytes += bytes;
    out.max_rank_bytes = std::max(out.max_rank_bytes, bytes);
    if (link >= 0) {
      out.time_s = std::max(out.time_s, lat + bytes / bw);
      out.energy_j += bytes * cluster.links[link].energy_per_byte;
    }
  }
  return out;
}

}  // namespace

Holding activation_holding(const ModelSpec& m, const Strategy& s, int rank, int world) {
  Holding h;
  h.count = 1;
  Box& b = h.parts[0];
  const int t = s.degree();
  const double seqs = double(effective_global_batch(m, world)) * t / world;
  slice(seqs * (world / t), rank / t, world / t, b.lo[0], b.hi[0]);
  b.lo[1] = 0, b.hi[1] = m.seq;
  b.lo[2] = 0, b.hi[2] = m.hidden;
  if (s.kind == StrategyKind::kTP1D && s.sp) slice(m.seq, rank % t, t, b.lo[1], b.hi[1]);
  if (s.kind == StrategyKind::kTP2D)
    slice(m.hidden, index_in(s, CommAxis::kMeshD2, rank, world), s.d2, b.lo[2], b.hi[2]);
  return h;
}

Holding param_holding(const ModelSpec& m, BlockKind kind, const Strategy& s, int rank,
                      int world) {
  const double h = m.hidden, f = m.ffn_size();
  const bool attn = kind == BlockKind::kAttention;
  const double c = attn ? 3 * h : f;  // in-weight columns
  const double k = attn ? h : f;      // out-weight rows
  // (i, n1): slice of in-columns / out-rows; (j, n2): slice of in-rows / out-columns.
  int i = 0, n1 = 1, j = 0, n2 = 1;
  if (s.kind == StrategyKind::kTP1D) i = rank % s.t, n1 = s.t;
  if (s.kind == StrategyKind::kTP2D) {
    i = index_in(s, CommAxis::kMeshD1, rank, world), n1 = s.d1;
    j = index_in(s, CommAxis::kMeshD2, rank, world), n2 = s.d2;
  }
  double c0, c1, r0, r1, k0, k1, o0, o1;
  slice(c, i, n1, c0, c1);
  slice(h, j, n2, r0, r1);
  slice(k, i, n1, k0, k1);
  slice(h, j, n2, o0, o1);
  Holding out;
  out.count = 5;
  out.parts[0] = box2(r0, r1, c0, c1);  // in-weight [h, c]
  // In-bias: tp2d attention's QKV bias follows the reduce-scatter over d2 (sharded over t).
  double b0 = c0, b1 = c1;
  if (s.kind == StrategyKind::kTP2D && attn) slice(c1 - c0, j, n2, b0, b1), b0 += c0, b1 += c0;
  out.parts[1] = box2(0, 1, b0, b1);
  out.parts[2] = box2(k0, k1, o0, o1);  // out-weight [k, h]
  // Out-bias and LayerNorm: replicated in 1D, sharded with the hidden dim over d2 in 2D.
  out.parts[3] = box2(0, 1, o0, o1);
  out.parts[4] = box2(0, 2, o0, o1);
  return out;
}

TransferCost redistribution_cost(const ModelSpec& m, const Strategy& from, const Strategy& to,
                                 const ClusterSpec& cluster, const LinkState& links) {
  const int world = links.world;
  std::vector<Holding> have(world), need(world);
  for (int r = 0; r < world; ++r) {
    have[r] = activation_holding(m, from, r, world);
    need[r] = activation_holding(m, to, r, world);
  }
  // r's sequences under `to` are those of its aligned block of to.degree() ranks; under
  // `from` they are held by the from-groups overlapping that block.
  const int ta = from.degree(), tb = to.degree();
  auto range = [&](int r) {
    const int b0 = r / tb * tb, b1 = b0 + tb;
    return std::pair<int, int>(b0 / ta * ta, (b1 + ta - 1) / ta * ta);
  };
  return transfer(have, need, dtype_bytes(m.dtype), range, cluster, links);
}

TransferCost repartition_cost(const ModelSpec& m, BlockKind kind, const Strategy& from,
                              const Strategy& to, double bytes_per_param,
                              const ClusterSpec& cluster, const LinkState& links) {
  const int world = links.world;
  if (param_layout_key(from) == param_layout_key(to)) return {};
  std::vector<Holding> have(world), need(world);
  for (int r = 0; r < world; ++r) {
    have[r] = param_holding(m, kind, from, r, world);
    need[r] = param_holding(m, kind, to, r, world);
  }
  // Every tp group of `from` holds a whole copy of the block: r pulls from its own group.
  const int ta = from.degree();
  auto range = [&](int r) { return std::pair<int, int>(r / ta * ta, r / ta * ta + ta); };
  return transfer(have, need, bytes_per_param, range, cluster, links);
}

uint32_t activation_layout_key(const Strategy& s) {
  const uint32_t t = s.degree();
  const uint32_t d2 = s.kind == StrategyKind::kTP2D ? s.d2 : 1;
  const uint32_t d1 = s.kind == StrategyKind::kTP2D ? s.d1 : 1;
  const uint32_t sp = s.kind == StrategyKind::kTP1D && s.sp && t > 1 ? 1 : 0;
  const uint32_t first = d1 > 1 && d2 > 1 && !s.row_first ? 1 : 0;
  return t | d2 << 12 | sp << 24 | first << 25;
}

uint32_t param_layout_key(const Strategy& s) {
  const uint32_t d1 = s.kind == StrategyKind::kTP2D ? s.d1 : s.degree();
  const uint32_t d2 = s.kind == StrategyKind::kTP2D ? s.d2 : 1;
  const uint32_t first = d1 > 1 && d2 > 1 && !s.row_first ? 1 : 0;
  return d1 | d2 << 12 | first << 24;
}

}  // namespace shardgym
