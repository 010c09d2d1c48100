#include "runtime/core/placement.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "runtime/core/cost.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

int index_in(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  if (it == ranks.end()) return -1;
  return static_cast<int>(it - ranks.begin());
}

// Slice `part` of `parts` equal pieces of [0, n).
std::pair<int64_t, int64_t> slice(int64_t n, int part, int parts, const char* what) {
  if (parts <= 0 || n % parts != 0) {
    std::ostringstream m;
    m << what << ": " << n << " does not split into " << parts << " equal parts";
    throw std::invalid_argument(m.str());
  }
  const int64_t w = n / parts;
  return {part * w, (part + 1) * w};
}

Box box1(int64_t n, int part, int parts, const char* what) {
  auto [lo, hi] = slice(n, part, parts, what);
  return Box{{lo}, {hi}};
}

Box box2(int64_t rows, int rpart, int rparts, int64_t cols, int cpart, int cparts,
         const char* what) {
  auto [r0, r1] = slice(rows, rpart, rparts, what);
  auto [c0, c1] = slice(cols, cpart, cparts, what);
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

int64_t Box::overlap(const Box& o) const {
  int64_t n = 1;
  for (int d = 0; d < dims(); ++d) {
    const int64_t e = std::min(hi[d], o.hi[d]) - std::max(lo[d], o.lo[d]);
    if (e <= 0) return 0;
    n *= e;
  }
  return n;
}

int64_t Box::overlap(const Box& o, const Box& p) const {
  int64_t n = 1;
  for (int d = 0; d < dims(); ++d) {
    const int64_t e = std::min({hi[d], o.hi[d], p.hi[d]}) - std::max({lo[d], o.lo[d], p.lo[d]});
    if (e <= 0) return 0;
    n *= e;
  }
  return n;
}

std::string Box::to_string() const {
  std::ostringstream s;
  s << "[";
  for (int d = 0; d < dims(); ++d) s << (d ? "," : "") << lo[d] << ":" << hi[d];
  s << "]";
  return s.str();
}

namespace {

BlockPlacement place(const Strategy& s, int rank, int world, bool with_data) {
  const int t = s.degree();
  if (t <= 0 || world % t != 0 || rank < 0 || rank >= world) {
    std::ostringstream m;
    m << s.to_string() << ": degree " << t << " does not fit rank " << rank << " of a world of "
      << world;
    throw std::invalid_argument(m.str());
  }
  if (s.uneven() && (!family_of(s).splits_heads_unevenly() || static_cast<int>(s.heads().size()) != t))
    throw std::invalid_argument(s.to_string() + ": heads= needs tp1d with one count per rank");
  BlockPlacement p;
  p.strategy = s;
  p.world = world;
  p.rank = rank;
  p.t = t;
  p.replicas = world / t;
  p.replica = rank / t;  // cost.h: tensor groups are consecutive ranks
  p.g1 = comm_group(s, CommAxis::kMeshD1, rank, world);
  p.g2 = comm_group(s, CommAxis::kMeshD2, rank, world);
  if (with_data) p.data = comm_group(s, CommAxis::kData, rank, world);
  p.n1 = static_cast<int>(p.g1.size());
  p.n2 = static_cast<int>(p.g2.size());
  p.i1 = index_in(p.g1, rank);
  p.i2 = index_in(p.g2, rank);
  p.sp = s.sp;
  if (p.i1 < 0 || p.i2 < 0 || p.n1 * p.n2 != t ||
      (with_data && static_cast<int>(p.data.size()) != p.replicas)) {
    std::ostringstream m;
    m << s.to_string() << ": groups of rank " << rank << " do not form a mesh (|G1|=" << p.n1
      << ", |G2|=" << p.n2 << ", t=" << t << ", replicas=" << p.data.size() << ")";
    throw std::runtime_error(m.str());
  }
  if (p.sp && p.n2 != 1) throw std::invalid_argument(s.to_string() + ": sp=1 needs a 1D group");
  return p;
}

}  // namespace

BlockPlacement place_block(const Strategy& s, int rank, int world) {
  return place(s, rank, world, true);
}

BlockPlacement place_block_mesh(const Strategy& s, int rank, int world) {
  return place(s, rank, world, false);
}

std::pair<int64_t, int64_t> head_range(const ModelSpec& m, const Strategy& s, int i) {
  // Grouped-query attention splits by query group: K and V heads are not shared across ranks
  // (Megatron-LM requires the groups to divide the degree: num_query_groups_per_partition).
  const int groups = m.kv_head_count(), per_group = m.heads / groups;
  if (!s.uneven()) {
    if (s.degree() <= 0 || m.heads % s.degree() != 0)
      throw std::invalid_argument("degree does not divide heads=" + std::to_string(m.heads));
    if (groups % s.degree() != 0)
      throw std::invalid_argument("degree does not divide kv_heads=" + std::to_string(groups));
    const int64_t per = m.heads / s.degree();
    return {i * per, (i + 1) * per};
  }
  const std::vector<int>& heads = s.heads();
  int64_t sum = 0, lo = 0;
  for (size_t k = 0; k < heads.size(); ++k) {
    if (static_cast<int>(k) < i) lo += heads[k];
    sum += heads[k];
  }
  if (!family_of(s).splits_heads_unevenly() || static_cast<int>(heads.size()) != s.degree())
    throw std::invalid_argument("heads= lists " + std::to_string(heads.size()) +
                                " ranks for t=" + std::to_string(s.t) + " (tp1d only)");
  if (*std::min_element(heads.begin(), heads.end()) < 1)
    throw std::invalid_argument("every rank of heads= needs at least one head");
  if (sum != m.heads)
    throw std::invalid_argument("heads= sums to " + std::to_string(sum) + ", the model has heads=" +
                                std::to_string(m.heads));
  for (int c : heads)
    if (c % per_group != 0)
      throw std::invalid_argument("heads= gives a rank " + std::to_string(c) +
                                  " heads, not whole query groups of " +
                                  std::to_string(per_group) + " (kv_heads=" +
                                  std::to_string(groups) + ")");
  if (m.ffn_size() % m.heads != 0)
    throw std::invalid_argument("ffn=" + std::to_string(m.ffn_size()) +
                                " does not split by heads=" + std::to_string(m.heads));
  return {lo, lo + heads[i]};
}

namespace {

// How one parameter tensor of a block is split (docs/design.md §3, the layouts of Megatron 1D
// and ATP 2D): rows/columns by the mesh axes of its GEMM, or by head range when uneven.
enum class Split {
  kHidden,   // [h]: by d2, replicated over d1 (norms, the out/fc2 biases)
  kInCols,   // [h, w]: rows by d2, columns by d1 (QKV, fc1)
  kInBias,   // [w]: QKV's by the whole group (follows the RS over d2), fc1's by d1
  kOutRows,  // [w, h]: rows by d1, columns by d2 (attention out, fc2)
};

struct TensorSpec {
  const char* name;
  std::vector<int64_t> shape;
  Split split;
  bool replicated_in_1d;  // the same box on every rank of a 1D tensor group
};

// The block's tensors in their fixed order, as the model has them: a norm without bias
// (RMSNorm) and GEMMs without biases leave theirs out. Widths: QKV h + 2·kv_heads·head_dim
// (3h without GQA), in query-group order (each group's query heads, then its K and V, as
// Megatron-Core lays it out), so a contiguous column range is a range of groups; fc1 ffn or
// 2·ffn (SwiGLU's gate and up, each rank's share of both in its range).
std::vector<TensorSpec> block_tensor_specs(const ModelSpec& m, BlockKind kind) {
  const int64_t h = m.hidden, f = m.ffn_size();
  const bool attn = kind == BlockKind::kAttention;
  const int64_t in = attn ? m.qkv_width() : m.fc1_width(), out_in = attn ? h : f;
  std::vector<TensorSpec> specs;
  specs.push_back({"ln.weight", {h}, Split::kHidden, true});
  if (!m.rmsnorm) specs.push_back({"ln.bias", {h}, Split::kHidden, true});
  specs.push_back({attn ? "qkv.weight" : "fc1.weight", {h, in}, Split::kInCols, false});
  if (m.linear_bias) specs.push_back({attn ? "qkv.bias" : "fc1.bias", {in}, Split::kInBias, false});
  specs.push_back({attn ? "proj.weight" : "fc2.weight", {out_in, h}, Split::kOutRows, false});
  if (m.linear_bias) specs.push_back({attn ? "proj.bias" : "fc2.bias", {h}, Split::kHidden, true});
  return specs;
}

Box spec_box(const ModelSpec& m, BlockKind kind, const BlockPlacement& p, const TensorSpec& t) {
  const bool attn = kind == BlockKind::kAttention;
  const int64_t h = m.hidden;
  if (p.strategy.uneven()) {
    // tp1d with heads per rank (strategy.h): rank i1 holds heads [a, b) and the FFN columns
    // of the same share; a 1D group has n2 = 1, so every other dimension is whole.
    const auto [a, b] = head_range(m, p.strategy, p.i1);
    // Columns of the in-GEMM (QKV, fc1) from head a to head b: QKV's in whole query groups
    // (its width over the groups per group; head_range has checked a and b are group
    // boundaries), the FFN's f/heads per head (fc1's 2·f/heads with SwiGLU).
    const int64_t width = t.split == Split::kInCols ? t.shape[1] : t.shape[0];
    const int64_t per_group = m.heads / m.kv_head_count();
    auto in_col = [&](int64_t head) {
      return attn ? width / m.kv_head_count() * (head / per_group) : width / m.heads * head;
    };
    const int64_t out_per_head = attn ? h / m.heads : m.ffn_size() / m.heads;
    switch (t.split) {
      case Split::kHidden: return Box{{0}, {h}};
      case Split::kInCols: return Box{{0, in_col(a)}, {h, in_col(b)}};
      case Split::kInBias: return Box{{in_col(a)}, {in_col(b)}};
      case Split::kOutRows: return Box{{out_per_head * a, 0}, {out_per_head * b, h}};
    }
  }
  if (attn && t.split == Split::kInCols) head_range(m, p.strategy, 0);  // heads and groups split
  switch (t.split) {
    case Split::kHidden: return box1(h, p.i2, p.n2, t.name);
    case Split::kInCols: return box2(h, p.i2, p.n2, t.shape[1], p.i1, p.n1, t.name);
    case Split::kInBias:
      return attn ? box1(t.shape[0], p.i1 * p.n2 + p.i2, p.t, t.name)
                  : box1(t.shape[0], p.i1, p.n1, t.name);
    case Split::kOutRows: return box2(t.shape[0], p.i1, p.n1, h, p.i2, p.n2, t.name);
  }
  return {};
}

}  // namespace

std::vector<Box> block_param_boxes(const ModelSpec& m, BlockKind kind, const BlockPlacement& p) {
  std::vector<Box> out;
  try {
    for (const TensorSpec& t : block_tensor_specs(m, kind)) out.push_back(spec_box(m, kind, p, t));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(p.strategy.to_string() +
                                (kind == BlockKind::kAttention ? " attention " : " MLP ") +
                                e.what());
  }
  return out;
}

int64_t block_param_elements(const ModelSpec& m, BlockKind kind, const BlockPlacement& p) {
  int64_t n = 0;
  for (const Box& b : block_param_boxes(m, kind, p)) n += b.numel();
  return n;
}

double rank_param_elements(const ModelSpec& m, BlockKind kind, const Strategy& s) {
  int fullest = 0;
  const std::vector<int>& heads = s.heads();
  for (int i = 1; i < static_cast<int>(heads.size()); ++i)
    if (heads[i] > heads[fullest]) fullest = i;
  return rank_param_elements(m, kind, s, fullest);
}

double rank_param_elements(const ModelSpec& m, BlockKind kind, const Strategy& s, int pos) {
  try {
    return static_cast<double>(block_param_elements(m, kind, place_block_mesh(s, pos, s.degree())));
  } catch (const std::invalid_argument&) {
    return block_rank_params(m, kind, s);
  }
}

std::vector<ParamShard> block_param_shards(const ModelSpec& m, int block, const BlockPlacement& p) {
  const BlockKind kind = ModelSpec::block_kind(block);
  const bool attn = kind == BlockKind::kAttention;
  const std::string prefix =
      "h." + std::to_string(ModelSpec::block_layer(block)) + (attn ? ".attn." : ".mlp.");
  const std::vector<TensorSpec> specs = block_tensor_specs(m, kind);
  std::vector<Box> boxes = block_param_boxes(m, kind, p);
  // Replicated over G1 (n2 pieces) is "tp_replicated" only for 1D groups, where G1 is the whole
  // tensor group; in 2D the G1 replicas compute identically, which is all the sum rule needs.
  const bool rep2 = p.n2 == 1 && p.t > 1;
  std::vector<ParamShard> out;
  for (size_t k = 0; k < specs.size(); ++k) {
    ParamShard s;
    s.name = prefix + specs[k].name;
    s.full_shape = specs[k].shape;
    s.box = std::move(boxes[k]);
    s.tp_replicated = specs[k].replicated_in_1d && rep2;
    s.decay = s.full_shape.size() >= 2;
    out.push_back(std::move(s));
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

int64_t BatchRows::total() const {
  int64_t t = 0;
  for (int64_t r : rows) t += r;
  return t;
}

std::pair<int64_t, int64_t> BatchRows::part(int part, int parts, const char* what) const {
  const int n = static_cast<int>(rows.size());
  if (n < 1 || parts < 1 || parts % n != 0) {
    std::ostringstream m;
    m << what << ": " << parts << " parts do not split over " << n << " share groups";
    throw std::invalid_argument(m.str());
  }
  const int per = parts / n, group = part / per;
  int64_t offset = 0;
  for (int i = 0; i < group; ++i) offset += rows[i];
  auto [lo, hi] = slice(rows[group], part % per, per, what);
  return {offset + lo, offset + hi};
}

Box block_activation_box(const ModelSpec& m, const BlockPlacement& p, int64_t global_batch) {
  return block_activation_box(m, p, BatchRows::whole(global_batch));
}

Box block_activation_box(const ModelSpec& m, const BlockPlacement& p, const BatchRows& rows) {
  const int64_t G = rows.total();
  auto [b0, b1] = rows.part(p.replica, p.replicas, "global batch over replicas");
  Box box = Box::whole({G, m.seq, m.hidden});
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
  return data_parallel_activation_box(m, rank, world, BatchRows::whole(global_batch));
}

Box data_parallel_activation_box(const ModelSpec& m, int rank, int world, const BatchRows& rows) {
  auto [b0, b1] = rows.part(rank, world, "global batch over the world");
  Box box = Box::whole({rows.total(), m.seq, m.hidden});
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
  // As embedding_params() counts them: no position table with rotary, no final-norm bias
  // with RMSNorm, no LM head of its own when it is tied to wte.
  add("wte", {m.vocab, h});
  if (!m.rotary) add("wpe", {m.seq, h});
  add("ln_f.weight", {h});
  if (!m.rmsnorm) add("ln_f.bias", {h});
  if (!m.tied_embeddings) add("lm_head.weight", {h, m.vocab});
  return out;
}

}  // namespace shardgym
