#include "runtime/live/tp/layout.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "runtime/core/cost.h"

namespace shardgym::live {
namespace {

int index_in(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  if (it == ranks.end()) return -1;
  return static_cast<int>(it - ranks.begin());
}

// Slice `part` of `parts` equal pieces of [0, n).
std::pair<int64_t, int64_t> slice(int64_t n, int part, int parts, const std::string& what) {
  if (parts <= 0 || n % parts != 0) {
    std::ostringstream m;
    m << what << ": " << n << " does not split into " << parts << " equal parts";
    throw std::invalid_argument(m.str());
  }
  const int64_t w = n / parts;
  return {part * w, (part + 1) * w};
}

Box box1(int64_t n, int part, int parts, const std::string& what) {
  auto [lo, hi] = slice(n, part, parts, what);
  return Box{{lo}, {hi}};
}

Box box2(int64_t rows, int rpart, int rparts, int64_t cols, int cpart, int cparts,
         const std::string& what) {
  auto [r0, r1] = slice(rows, rpart, rparts, what + " rows");
  auto [c0, c1] = slice(cols, cpart, cparts, what + " cols");
  return Box{{r0, c0}, {r1, c1}};
}

}  // namespace

Box Box::whole(const std::vector<int64_t>& shape) {
  return Box{std::vector<int64_t>(shape.size(), 0), shape};
}

std::vector<int64_t> Box::extents() const {
  std::vector<int64_t> e(lo.size());
  for (int d = 0; d < dims(); ++d) e[d] = extent(d);
  return e;
}

int64_t Box::numel() const {
  int64_t n = 1;
  for (int d = 0; d < dims(); ++d) n *= std::max<int64_t>(0, extent(d));
  return n;
}

bool Box::contains(const Box& o) const {
  for (int d = 0; d < dims(); ++d)
    if (o.lo[d] < lo[d] || o.hi[d] > hi[d]) return false;
  return true;
}

Box Box::intersect(const Box& o) const {
  Box r = *this;
  for (int d = 0; d < dims(); ++d) {
    r.lo[d] = std::max(lo[d], o.lo[d]);
    r.hi[d] = std::max(r.lo[d], std::min(hi[d], o.hi[d]));
  }
  return r;
}

std::string Box::to_string() const {
  std::ostringstream s;
  s << "[";
  for (int d = 0; d < dims(); ++d) s << (d ? "," : "") << lo[d] << ":" << hi[d];
  s << "]";
  return s.str();
}

BlockPlacement place_block(const Strategy& s, int rank, int world) {
  const int t = s.degree();
  if (t <= 0 || world % t != 0 || rank < 0 || rank >= world) {
    std::ostringstream m;
    m << s.to_string() << ": degree " << t << " does not fit rank " << rank << " of a world of "
      << world;
    throw std::invalid_argument(m.str());
  }
  BlockPlacement p;
  p.strategy = s;
  p.world = world;
  p.rank = rank;
  p.t = t;
  p.replicas = world / t;
  p.replica = rank / t;  // cost.h: tensor groups are consecutive ranks
  p.g1 = comm_group(s, CommAxis::kMeshD1, rank, world);
  p.g2 = comm_group(s, CommAxis::kMeshD2, rank, world);
  p.data = comm_group(s, CommAxis::kData, rank, world);
  if (s.kind == StrategyKind::kDP) p.g1 = {rank};  // dp has no tensor axis
  p.n1 = static_cast<int>(p.g1.size());
  p.n2 = static_cast<int>(p.g2.size());
  p.i1 = index_in(p.g1, rank);
  p.i2 = index_in(p.g2, rank);
  p.sp = s.sp;
  if (p.i1 < 0 || p.i2 < 0 || p.n1 * p.n2 != t ||
      static_cast<int>(p.data.size()) != p.replicas) {
    std::ostringstream m;
    m << s.to_string() << ": groups of rank " << rank << " do not form a mesh (|G1|=" << p.n1
      << ", |G2|=" << p.n2 << ", t=" << t << ", replicas=" << p.data.size() << ")";
    throw std::runtime_error(m.str());
  }
  if (p.sp && p.n2 != 1) throw std::invalid_argument(s.to_string() + ": sp=1 needs a 1D group");
  return p;
}

std::vector<ParamShard> block_param_shards(const ModelSpec& m, int block, const BlockPlacement& p) {
  const int64_t h = m.hidden, f = m.ffn_size();
  const std::string prefix = "h." + std::to_string(ModelSpec::block_layer(block)) +
                             (ModelSpec::block_kind(block) == BlockKind::kAttention ? ".attn."
                                                                                     : ".mlp.");
  auto shard = [&](const std::string& n, std::vector<int64_t> shape, Box box, bool replicated) {
    ParamShard s;
    s.name = prefix + n;
    s.full_shape = std::move(shape);
    s.box = std::move(box);
    s.tp_replicated = replicated;
    s.decay = s.full_shape.size() >= 2;
    return s;
  };
  // Replicated over G1 (n2 pieces) is "tp_replicated" only for 1D groups, where G1 is the whole
  // tensor group; in 2D the G1 replicas compute identically, which is all the sum rule needs.
  const bool rep2 = p.n2 == 1 && p.t > 1;
  std::vector<ParamShard> out;
  out.push_back(shard("ln.weight", {h}, box1(h, p.i2, p.n2, prefix + "ln.weight"), rep2));
  out.push_back(shard("ln.bias", {h}, box1(h, p.i2, p.n2, prefix + "ln.bias"), rep2));
  if (ModelSpec::block_kind(block) == BlockKind::kAttention) {
    const int hb = p.i1 * p.n2 + p.i2;
    if (m.heads % p.t != 0)
      throw std::invalid_argument(p.strategy.to_string() + ": degree does not divide heads=" +
                                  std::to_string(m.heads));
    out.push_back(shard("qkv.weight", {h, 3 * h},
                        box2(h, p.i2, p.n2, 3 * h, p.i1, p.n1, prefix + "qkv.weight"), false));
    out.push_back(shard("qkv.bias", {3 * h}, box1(3 * h, hb, p.t, prefix + "qkv.bias"), false));
    out.push_back(shard("proj.weight", {h, h},
                        box2(h, p.i1, p.n1, h, p.i2, p.n2, prefix + "proj.weight"), false));
    out.push_back(shard("proj.bias", {h}, box1(h, p.i2, p.n2, prefix + "proj.bias"), rep2));
  } else {
    out.push_back(shard("fc1.weight", {h, f},
                        box2(h, p.i2, p.n2, f, p.i1, p.n1, prefix + "fc1.weight"), false));
    out.push_back(shard("fc1.bias", {f}, box1(f, p.i1, p.n1, prefix + "fc1.bias"), false));
    out.push_back(shard("fc2.weight", {f, h},
                        box2(f, p.i1, p.n1, h, p.i2, p.n2, prefix + "fc2.weight"), false));
    out.push_back(shard("fc2.bias", {h}, box1(h, p.i2, p.n2, prefix + "fc2.bias"), rep2));
  }
  return out;
}

std::vector<int> grad_sum_ranks(const BlockPlacement& p, const ParamShard& shard) {
  if (!(p.sp && shard.tp_replicated)) return p.data;
  std::vector<int> all;  // replicas × tensor group = every rank holding this box
  for (int r : p.data)
    for (int k = 0; k < p.t; ++k) all.push_back(r / p.t * p.t + k);
  std::sort(all.begin(), all.end());
  return all;
}

Box block_activation_box(const ModelSpec& m, const BlockPlacement& p, int64_t global_batch) {
  auto [b0, b1] = slice(global_batch, p.replica, p.replicas, "global batch over replicas");
  Box box = Box::whole({global_batch, m.seq, m.hidden});
  box.lo[0] = b0;
  box.hi[0] = b1;
  if (p.sp) {
    auto [s0, s1] = slice(m.seq, p.i1, p.t, "sequence over the tensor group");
    box.lo[1] = s0;
    box.hi[1] = s1;
  }
  auto [h0, h1] = slice(m.hidden, p.i2, p.n2, "hidden over mesh axis d2");
  box.lo[2] = h0;
  box.hi[2] = h1;
  return box;
}

Box data_parallel_activation_box(const ModelSpec& m, int rank, int world, int64_t global_batch) {
  auto [b0, b1] = slice(global_batch, rank, world, "global batch over the world");
  Box box = Box::whole({global_batch, m.seq, m.hidden});
  box.lo[0] = b0;
  box.hi[0] = b1;
  return box;
}

std::vector<ParamShard> outer_param_shards(const ModelSpec& m) {
  const int64_t h = m.hidden;
  std::vector<ParamShard> out;
  auto add = [&](const std::string& n, std::vector<int64_t> shape) {
    ParamShard s;
    s.name = n;
    s.full_shape = shape;
    s.box = Box::whole(shape);
    s.decay = shape.size() >= 2;
    out.push_back(std::move(s));
  };
  add("wte", {m.vocab, h});
  add("wpe", {m.seq, h});
  add("ln_f.weight", {h});
  add("ln_f.bias", {h});
  add("lm_head.weight", {h, m.vocab});
  return out;
}

}  // namespace shardgym::live
