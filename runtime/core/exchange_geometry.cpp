#include "runtime/core/exchange_geometry.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace shardgym {
namespace {

void check_item(const ExchangeItem& it, size_t k, int world) {
  const size_t nd = it.full_shape.size();
  auto bad = [&](const char* what) {
    throw std::invalid_argument("exchange item " + std::to_string(k) + ": " + what);
  };
  if (it.have.empty() || it.want.empty()) bad("no boxes");
  if (it.have.size() > static_cast<size_t>(world) || it.want.size() > static_cast<size_t>(world))
    bad("more boxes than ranks");
  for (const auto* boxes : {&it.have, &it.want})
    for (const Box& b : *boxes)
      if (b.lo.size() != nd || b.hi.size() != nd) bad("a box of another rank than the tensor");
}

// Sorted distinct cut points of dimension d over every listed box of the item.
std::vector<int64_t> cuts(const ExchangeItem& it, int d) {
  std::vector<int64_t> c = {0, it.full_shape[d]};
  for (const auto* boxes : {&it.have, &it.want})
    for (const auto& b : *boxes) {
      c.push_back(b.lo[d]);
      c.push_back(b.hi[d]);
    }
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

std::vector<std::vector<int64_t>> all_cuts(const ExchangeItem& it) {
  std::vector<std::vector<int64_t>> c(it.full_shape.size());
  for (size_t d = 0; d < c.size(); ++d) c[d] = cuts(it, static_cast<int>(d));
  return c;
}

// Grid cells of `box` (row-major order) under the item's cuts.
std::vector<Box> grid_cells(const Box& box, const std::vector<std::vector<int64_t>>& all_cuts) {
  if (box.empty()) return {};
  const int nd = box.dims();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans(nd);
  for (int d = 0; d < nd; ++d) {
    const auto& c = all_cuts[d];
    for (size_t i = 0; i + 1 < c.size(); ++i)
      if (c[i] >= box.lo[d] && c[i + 1] <= box.hi[d]) spans[d].push_back({c[i], c[i + 1]});
  }
  std::vector<Box> out;
  std::vector<size_t> idx(nd, 0);
  while (true) {
    Box cell{std::vector<int64_t>(nd), std::vector<int64_t>(nd)};
    for (int d = 0; d < nd; ++d) {
      cell.lo[d] = spans[d][idx[d]].first;
      cell.hi[d] = spans[d][idx[d]].second;
    }
    out.push_back(std::move(cell));
    int d = nd - 1;
    while (d >= 0 && ++idx[d] == spans[d].size()) idx[d--] = 0;
    if (d < 0) break;
  }
  return out;
}

// The nearest rank other than dst holding `cell` (ties to the lower rank), searched up to
// `reach` ranks away; -1 when none does.
int nearest_holder(const ExchangeItem& it, const Box& cell, int dst, int world, int reach) {
  for (int k = 1; k <= reach; ++k) {
    if (dst - k >= 0 && it.have_of(dst - k).contains(cell)) return dst - k;
    if (dst + k < world && it.have_of(dst + k).contains(cell)) return dst + k;
  }
  return -1;
}

int reach_of(const ExchangeItem& it, int world) {
  // One box per rank: the whole world. Periodic: every residue is within have.size() − 1.
  return it.have.size() >= static_cast<size_t>(world) ? world : static_cast<int>(it.have.size());
}

[[noreturn]] void no_holder(size_t k, const Box& cell, int dst) {
  std::ostringstream m;
  m << "exchange item " << k << ": cell " << cell.to_string() << " wanted by rank " << dst
    << " is held by no rank";
  throw std::invalid_argument(m.str());
}

// Calls f(item, cell, src) for every cell dst lacks, in item and row-major cell order.
template <typename F>
void for_each_missing(const ExchangeItem& it, size_t k, const std::vector<std::vector<int64_t>>& c,
                      int dst, int world, F&& f) {
  const Box& have = it.have_of(dst);
  for (Box& cell : grid_cells(it.want_of(dst), c)) {
    if (have.contains(cell)) continue;
    const int src = nearest_holder(it, cell, dst, world, reach_of(it, world));
    if (src < 0) no_holder(k, cell, dst);
    f(std::move(cell), src);
  }
}

}  // namespace

ExchangeItem ExchangeItem::covering(std::vector<Box> have, std::vector<Box> want) {
  ExchangeItem it;
  if (!have.empty()) {
    it.full_shape = have[0].hi;
    for (const Box& b : have)
      for (int d = 0; d < b.dims() && d < static_cast<int>(it.full_shape.size()); ++d)
        it.full_shape[d] = std::max(it.full_shape[d], b.hi[d]);
  }
  it.have = std::move(have);
  it.want = std::move(want);
  return it;
}

RankExchange plan_rank_exchange(const std::vector<ExchangeItem>& items, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("exchange: rank " + std::to_string(rank) + " of " +
                                std::to_string(world));
  RankExchange x;
  x.send.resize(world);
  x.recv.resize(world);
  for (size_t k = 0; k < items.size(); ++k) {
    const ExchangeItem& it = items[k];
    check_item(it, k, world);
    const auto c = all_cuts(it);
    const int item = static_cast<int>(k);
    for (Box& cell : grid_cells(it.want_of(rank), c))
      if (it.have_of(rank).contains(cell)) x.local.push_back({item, std::move(cell)});
    // Every rank's wants decide what this rank sends, and whether anything travels at all.
    for (int dst = 0; dst < world; ++dst) {
      for_each_missing(it, k, c, dst, world, [&](Box cell, int src) {
        x.local_only = false;
        if (src == rank) x.send[dst].push_back({item, cell});
        if (dst == rank) x.recv[src].push_back({item, std::move(cell)});
      });
    }
  }
  for (int q = 0; q < world; ++q) {
    for (const ExchangeCell& c : x.recv[q]) x.elements_received += c.box.numel();
    for (const ExchangeCell& c : x.send[q]) x.elements_sent += c.box.numel();
  }
  return x;
}

ExchangeMessages exchange_messages(const std::vector<ExchangeItem>& items, int world) {
  if (world < 1) throw std::invalid_argument("exchange: world of " + std::to_string(world));
  ExchangeMessages out;
  out.largest.assign(world, 0);
  out.count.assign(world, 0);
  if (items.empty()) return out;
  int reach = 1;
  size_t period = 1;
  for (size_t k = 0; k < items.size(); ++k) {
    check_item(items[k], k, world);
    reach = std::max(reach, reach_of(items[k], world));
    for (size_t n : {items[k].have.size(), items[k].want.size()})
      period = std::min<size_t>(std::lcm(period, n), world);
  }
  // Ranks [2·reach, P − 2·reach) trade only with ranks whose search is not cut by an end of
  // the world, and those repeat every `period` ranks. Evaluate both ends (width A) and copy.
  const int64_t A = 2 * int64_t(reach) + int64_t(period);
  const bool all = 2 * (A + reach) >= world;
  auto counted = [&](int d) { return all || d < A + reach || d >= world - A - reach; };

  // msg[d][src − d + reach]: elements dst d receives from src.
  const int width = 2 * reach + 1;
  std::vector<int64_t> msg(size_t(world) * width, 0);
  for (size_t k = 0; k < items.size(); ++k) {
    const auto c = all_cuts(items[k]);
    for (int d = 0; d < world; ++d) {
      if (!counted(d)) continue;
      for_each_missing(items[k], k, c, d, world, [&](const Box& cell, int src) {
        msg[size_t(d) * width + (src - d + reach)] += cell.numel();
      });
    }
  }
  auto of_rank = [&](int r, int64_t& largest, int& count) {
    largest = 0, count = 0;
    for (int off = -reach; off <= reach; ++off) {
      const int q = r + off;
      if (q < 0 || q >= world) continue;
      for (const int64_t m : {msg[size_t(r) * width + (off + reach)],     // r receives from q
                              msg[size_t(q) * width + (r - q + reach)]})  // r sends to q
        if (m > 0) largest = std::max(largest, m), ++count;
    }
  };
  for (int r = 0; r < world; ++r) {
    if (all || r < A || r >= world - A) {
      of_rank(r, out.largest[r], out.count[r]);
    } else {
      const int same = 2 * reach + (r - 2 * reach) % period;
      out.largest[r] = out.largest[same], out.count[r] = out.count[same];
    }
  }
  return out;
}

std::vector<int64_t> largest_message_elements(const std::vector<ExchangeItem>& items, int world) {
  return exchange_messages(items, world).largest;
}

}  // namespace shardgym
