#include "runtime/sim/layout.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "runtime/core/exchange_geometry.h"
#include "runtime/core/placement.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

// The boxes one rank holds: a list of boxes (one per tensor), with dimension 0 of every box
// replaced by the rows [r0, r1) when r1 >= 0.
struct BoxesOf {
  const std::vector<Box>* boxes = nullptr;
  int64_t r0 = 0, r1 = -1;
  size_t size() const { return boxes->size(); }
  int64_t lo(size_t k, int d) const { return d == 0 && r1 >= 0 ? r0 : (*boxes)[k].lo[d]; }
  int64_t hi(size_t k, int d) const { return d == 0 && r1 >= 0 ? r1 : (*boxes)[k].hi[d]; }
};

// The boxes of every rank under one strategy (runtime/core/placement.h). Ranks r and r' with
// r ≡ r' (mod period) hold the same boxes, so only `period` lists are stored; activation
// boxes differ between replicas only in their rows (dimension 0: replica rank / period takes
// rows [replica·w, (replica + 1)·w)), so they too are stored per mesh position, and a rank's
// rows are computed: O(t) memory, not O(P) (docs/robustness.md, "Accepted configs finish").
struct RankBoxes {
  int period = 1;
  std::vector<std::vector<Box>> boxes;
  int64_t rows_per_replica = -1;  // >= 0: activations, rows by replica
  // A layout over the ranks [first, first + count) only (a pipeline stage): rank q holds
  // boxes[(q − first) % period] there and `none` (empty boxes) elsewhere. count < 0: every rank.
  int first = 0, count = -1;
  std::vector<Box> none;
  BoxesOf of(int rank) const {
    if (count >= 0 && (rank < first || rank >= first + count)) return BoxesOf{&none};
    rank -= first;
    BoxesOf b{&boxes[rank % period]};
    if (rows_per_replica >= 0) {
      b.r0 = int64_t(rank / period) * rows_per_replica;
      b.r1 = b.r0 + rows_per_replica;
    }
    return b;
  }
};

// Parameter boxes depend on the mesh position rank mod t only (placement.h, "Symmetry").
RankBoxes param_boxes(const ModelSpec& m, BlockKind kind, const Strategy& s, int world) {
  RankBoxes out;
  out.period = s.degree();
  out.boxes.reserve(out.period);
  for (int pos = 0; pos < out.period; ++pos)
    out.boxes.push_back(block_param_boxes(m, kind, place_block_mesh(s, pos, world)));
  return out;
}

// Activation boxes of a batch of G sequences: the mesh position gives sequence and hidden
// slices, the replica the rows (block_activation_box: G / replicas rows each, G divisible).
RankBoxes activation_boxes(const ModelSpec& m, const Strategy& s, int world, int64_t G) {
  RankBoxes out;
  const int t = s.degree();
  out.period = t;
  out.boxes.resize(t);
  for (int pos = 0; pos < t; ++pos) {
    BlockPlacement p = place_block_mesh(s, pos, world);
    p.rank = pos;
    p.replica = 0;
    out.boxes[pos] = {block_activation_box(m, p, G)};  // throws when G does not split
    out.rows_per_replica = out.boxes[pos][0].hi[0] - out.boxes[pos][0].lo[0];
  }
  return out;
}

// A strategy whose degree does not divide the world has no placement on it.
bool fits(const Strategy& s, int world) {
  const int t = s.degree();
  return t > 0 && t <= world && world % t == 0;
}

int64_t numel(const BoxesOf& b) {
  int64_t n = 0;
  for (size_t k = 0; k < b.size(); ++k) {
    int64_t e = 1;
    for (int d = 0; d < (*b.boxes)[k].dims(); ++d) e *= std::max<int64_t>(0, b.hi(k, d) - b.lo(k, d));
    n += e;
  }
  return n;
}

// Elements of `want` held in `have` (tensor by tensor).
int64_t overlap(const BoxesOf& want, const BoxesOf& have) {
  int64_t n = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    int64_t e = 1;
    for (int d = 0; d < (*want.boxes)[k].dims() && e > 0; ++d)
      e *= std::max<int64_t>(0, std::min(want.hi(k, d), have.hi(k, d)) -
                                    std::max(want.lo(k, d), have.lo(k, d)));
    n += e;
  }
  return n;
}

// Elements of `want` held in both `a` and `b`.
int64_t overlap(const BoxesOf& want, const BoxesOf& a, const BoxesOf& b) {
  int64_t n = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    int64_t e = 1;
    for (int d = 0; d < (*want.boxes)[k].dims() && e > 0; ++d)
      e *= std::max<int64_t>(0, std::min({want.hi(k, d), a.hi(k, d), b.hi(k, d)}) -
                                    std::max({want.lo(k, d), a.lo(k, d), b.lo(k, d)}));
    n += e;
  }
  return n;
}

std::vector<int64_t> missing_elements(const RankBoxes& have, const RankBoxes& need, int world) {
  std::vector<int64_t> out(world);
  for (int r = 0; r < world; ++r) out[r] = numel(need.of(r)) - overlap(need.of(r), have.of(r));
  return out;
}

// Rank r needs need.of(r), holds have.of(r); sources are searched in [lo(r), hi(r)).
template <typename Range>
TransferCost transfer(const RankBoxes& have, const RankBoxes& need, double elem_bytes, Range range,
                      const ClusterSpec& cluster, const LinkState& links) {
  TransferCost out;
  const int world = links.world;
  // The rank whose scan last saw each node (a stamp: no O(nodes) reset per rank).
  std::vector<int> node_seen(cluster.num_nodes(), -1);
  for (int r = 0; r < world; ++r) {
    const BoxesOf want = need.of(r);
    const BoxesOf mine = have.of(r);
    const int64_t missing = numel(want) - overlap(want, mine);
    if (missing == 0) continue;
    double bw = std::numeric_limits<double>::infinity(), lat = 0;
    int link = -1;
    // The matrix's bandwidth and latency depend only on the pair of nodes, so one source
    // per node is enough to know the link it offers.
    auto scan = [&](int lo, int hi) {
      for (int q = std::max(lo, 0); q < std::min(hi, world); ++q) {
        if (q == r || node_seen[links.node[q]] == r) continue;
        const BoxesOf theirs = have.of(q);
        // q is a source when it holds some of what r lacks.
        if (overlap(want, theirs) - overlap(want, theirs, mine) == 0) continue;
        node_seen[links.node[q]] = r;
        const double b = links.bw(q, r);
        if (b < bw) bw = b, link = links.link_of(q, r);
        lat = std::max(lat, links.lat(q, r));
      }
    };
    const auto [lo, hi] = range(r);
    scan(lo, hi);
    if (link < 0) scan(0, world);  // not found nearby: any holder
    const double bytes = double(missing) * elem_bytes;
    out.bytes += bytes;
    out.max_rank_bytes = std::max(out.max_rank_bytes, bytes);
    if (link >= 0) {
      out.time_s = std::max(out.time_s, lat + bytes / bw);
      out.energy_j += bytes * cluster.links[link].energy_per_byte;
    }
  }
  return out;
}

// The exchange's messages (runtime/core/exchange_geometry.h) into `out`: the largest message
// and the most messages of one rank and, with `per_rank`, each rank's part (rank_moves).
void add_messages(TransferCost& out, const std::vector<ExchangeItem>& items,
                  const RankBoxes& have, const RankBoxes& want, double bytes_per_param,
                  int world, bool per_rank) {
  const ExchangeMessages msg = exchange_messages(items, world);
  out.max_message_bytes =
      double(*std::max_element(msg.largest.begin(), msg.largest.end())) * bytes_per_param;
  out.max_rank_messages = *std::max_element(msg.count.begin(), msg.count.end());
  if (!per_rank) return;
  out.rank_moves.resize(world);
  for (int r = 0; r < world; ++r) {
    const BoxesOf a = have.of(r), z = want.of(r);
    RankMove& mv = out.rank_moves[r];
    mv.message_bytes = double(msg.largest[r]) * bytes_per_param;
    mv.old_elements = double(numel(a));
    mv.new_elements = double(numel(z));
    mv.keeps = mv.old_elements == mv.new_elements && overlap(z, a) == numel(z);
  }
}

}  // namespace

std::vector<int64_t> redistribution_elements(const ModelSpec& m, const Strategy& from,
                                             const Strategy& to, int world) {
  const int64_t G = effective_global_batch(m, world);
  return missing_elements(activation_boxes(m, from, world, G), activation_boxes(m, to, world, G),
                          world);
}

std::vector<int64_t> repartition_elements(const ModelSpec& m, BlockKind kind, const Strategy& from,
                                          const Strategy& to, int world) {
  return missing_elements(param_boxes(m, kind, from, world), param_boxes(m, kind, to, world),
                          world);
}

TransferCost redistribution_cost(const ModelSpec& m, const Strategy& from, const Strategy& to,
                                 const ClusterSpec& cluster, const LinkState& links) {
  const int world = links.world;
  const int ta = from.degree(), tb = to.degree();
  if (!fits(from, world) || !fits(to, world)) return {};
  // A pipeline stage's micro-batch may hold fewer sequences than a strategy has replicas (2
  // sequences over 4 data-parallel ranks). Boxes need whole rows, so such a batch is counted
  // with the smallest batch both layouts split (the lcm of their replica counts) and scaled:
  // every row boundary is G·replica/R, so the picture scales along the batch axis and the
  // bytes (per rank and in total) are linear in G.
  const int64_t G = effective_global_batch(m, world);
  const int64_t ra = world / ta, rb = world / tb;
  const int64_t g = G % ra == 0 && G % rb == 0 ? G : std::lcm(ra, rb);
  const double scale = double(G) / double(g);
  // r's sequences under `to` are those of its aligned block of to.degree() ranks; under
  // `from` they are held by the from-groups overlapping that block.
  auto range = [&](int r) {
    const int b0 = r / tb * tb, b1 = b0 + tb;
    return std::pair<int, int>(b0 / ta * ta, (b1 + ta - 1) / ta * ta);
  };
  try {
    return transfer(activation_boxes(m, from, world, g), activation_boxes(m, to, world, g),
                    dtype_bytes(m.dtype) * scale, range, cluster, links);
  } catch (const std::invalid_argument&) {
    return {};  // a layout that does not split (sequence or hidden): no placement, see header
  }
}

TransferCost repartition_cost(const ModelSpec& m, BlockKind kind, const Strategy& from,
                              const Strategy& to, double bytes_per_param,
                              const ClusterSpec& cluster, const LinkState& links) {
  const int world = links.world;
  if (param_layout_key(from) == param_layout_key(to)) return {};
  if (!fits(from, world) || !fits(to, world)) return {};
  // Every tp group of `from` holds a whole copy of the block: r pulls from its own group.
  const int ta = from.degree();
  auto range = [&](int r) { return std::pair<int, int>(r / ta * ta, r / ta * ta + ta); };
  try {
    const RankBoxes have = param_boxes(m, kind, from, world), want = param_boxes(m, kind, to, world);
    TransferCost out = transfer(have, want, bytes_per_param, range, cluster, links);
    // The exchange's messages: one item per parameter, listed for one period of each layout
    // (the moments have the parameter's boxes: bytes_per_param covers them).
    std::vector<ExchangeItem> items;
    for (size_t k = 0; k < have.boxes[0].size(); ++k) {
      std::vector<Box> h, w;
      for (const auto& boxes : have.boxes) h.push_back(boxes[k]);
      for (const auto& boxes : want.boxes) w.push_back(boxes[k]);
      items.push_back(ExchangeItem::covering(std::move(h), std::move(w)));
    }
    add_messages(out, items, have, want, bytes_per_param, world, from.uneven() || to.uneven());
    return out;
  } catch (const std::invalid_argument&) {
    return {};  // a weight that does not split evenly: no placement, see header
  }
}

TransferCost stage_move_cost(const ModelSpec& m, BlockKind kind, const Strategy& from,
                             int from_first, int from_size, const Strategy& to, int to_first,
                             int to_size, double bytes_per_param, const ClusterSpec& cluster,
                             const LinkState& links) {
  const int world = links.world;
  if (!fits(from, from_size) || !fits(to, to_size) || from_first < 0 || to_first < 0 ||
      from_first + from_size > world || to_first + to_size > world)
    return {};
  try {
    auto staged = [&](const Strategy& s, int first, int size) {
      RankBoxes b = param_boxes(m, kind, s, size);
      b.first = first, b.count = size;
      b.none = b.boxes.front();
      for (Box& x : b.none) x.hi = x.lo;
      return b;
    };
    const RankBoxes have = staged(from, from_first, from_size), want = staged(to, to_first, to_size);
    // r pulls from the old stage.
    auto range = [&](int) { return std::pair<int, int>(from_first, from_first + from_size); };
    TransferCost out = transfer(have, want, bytes_per_param, range, cluster, links);
    std::vector<ExchangeItem> items;
    for (size_t k = 0; k < have.boxes[0].size(); ++k) {
      ExchangeItem item;
      item.full_shape = have.boxes[0][k].hi;
      for (int q = 0; q < world; ++q) {
        item.have.push_back((*have.of(q).boxes)[k]);
        item.want.push_back((*want.of(q).boxes)[k]);
        for (const Box* x : {&item.have.back(), &item.want.back()})
          for (size_t d = 0; d < item.full_shape.size(); ++d)
            item.full_shape[d] = std::max(item.full_shape[d], x->hi[d]);
      }
      items.push_back(std::move(item));
    }
    add_messages(out, items, have, want, bytes_per_param, world, /*per_rank=*/true);
    return out;
  } catch (const std::invalid_argument&) {
    return {};  // a weight that does not split evenly: no placement, see header
  }
}

uint64_t strategy_key(const Strategy& s) {
  // The family's fields (StrategyFamily::key: 42 bits) from bit 2, after the kind.
  const uint64_t f = family_of(s).key(s);
  const uint64_t chunks = uint64_t(s.chunks);
  if (f == StrategyFamily::kNoKey || chunks >= (1u << 18)) return kUnpackable;
  return uint64_t(s.kind) | f << 2 | chunks << 44 |
         uint64_t(s.selective ? 1 : 0) << 62 | uint64_t(s.recompute ? 1 : 0) << 63;
}

uint32_t activation_layout_key(const Strategy& s) {
  const StrategyFamily& family = family_of(s);
  const Mesh mesh = family.mesh(s);
  const uint32_t t = s.degree(), d1 = mesh.d1, d2 = mesh.d2;
  const uint32_t sp = family.sequence_parallel(s) && t > 1 ? 1 : 0;
  const uint32_t first = d1 > 1 && d2 > 1 && !mesh.row_first ? 1 : 0;
  return t | d2 << 12 | sp << 24 | first << 25;
}

uint64_t param_layout_key(const Strategy& s) {
  const StrategyFamily& family = family_of(s);
  const Mesh mesh = family.mesh(s);
  const uint32_t d1 = mesh.d1, d2 = mesh.d2;
  const uint32_t first = d1 > 1 && d2 > 1 && !mesh.row_first ? 1 : 0;
  // An uneven split's boxes differ from the even one's: its interned id (strategy.h).
  const uint64_t uneven = family.splits_heads_unevenly() ? s.heads_id : 0;
  return uint64_t(d1) | uint64_t(d2) << 12 | uint64_t(first) << 24 | uneven << 25;
}

}  // namespace shardgym
