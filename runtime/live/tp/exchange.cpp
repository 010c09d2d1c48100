#include "runtime/live/tp/exchange.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>

#include "kernels/reshard_pack.h"

#ifdef SHARDGYM_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace shardgym::live {
at::Tensor box_view(const at::Tensor& t, const Box& t_box, const Box& box) {
  if (t.dim() != box.dims() || !t_box.contains(box))
    throw std::invalid_argument("box " + box.to_string() + " is not inside " + t_box.to_string());
  at::Tensor v = t;
  for (int d = 0; d < box.dims(); ++d) v = v.narrow(d, box.lo[d] - t_box.lo[d], box.extent(d));
  return v;
}

at::Tensor box_view(const at::Tensor& full, const Box& box) {
  return box_view(full, Box::whole(full.sizes().vec()), box);
}

namespace {

at::Tensor view_of(const at::Tensor& t, const Box& t_box, const Box& cell) {
  return box_view(t, t_box, cell);
}

// `cell` of a contiguous matrix or vector `t` (whose box is `t_box`) as a region of
// kernels/reshard_pack.h: the repartition's pack and unpack run through those loops, on the
// CPU (float32 / float64) and, in a CUDA build, on the device (float32, reshard_pack.cu, on the
// tensor's current stream). Anything else (more dimensions, another dtype or device) returns
// false and is copied through ATen views.
bool on_cuda(const at::Tensor& t) {
#ifdef SHARDGYM_WITH_CUDA
  return t.device().is_cuda();
#else
  (void)t;
  return false;
#endif
}

bool as_region(const at::Tensor& t, const Box& t_box, const Box& cell, kernels::Region& r,
               int64_t& rows, int64_t& cols) {
  if (!t.is_contiguous() || t.dim() < 1 || t.dim() > 2) return false;
  if (on_cuda(t)) {
    if (t.scalar_type() != at::kFloat) return false;
  } else if (!t.device().is_cpu() ||
             (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble)) {
    return false;
  }
  if (t.dim() == 1) {
    rows = 1, cols = t.size(0);
    r = {0, 1, cell.lo[0] - t_box.lo[0], cell.hi[0] - t_box.lo[0]};
  } else {
    rows = t.size(0), cols = t.size(1);
    r = {cell.lo[0] - t_box.lo[0], cell.hi[0] - t_box.lo[0], cell.lo[1] - t_box.lo[1],
         cell.hi[1] - t_box.lo[1]};
  }
  return true;
}

// Copies `cell` of t into dst[0, cell.numel()).
void pack_cell(const at::Tensor& t, const Box& t_box, const Box& cell, at::Tensor dst) {
  kernels::Region r;
  int64_t rows = 0, cols = 0;
  if (!as_region(t, t_box, cell, r, rows, cols) || dst.scalar_type() != t.scalar_type() ||
      dst.device() != t.device() || !dst.is_contiguous()) {
    dst.copy_(view_of(t, t_box, cell).reshape({-1}));
    return;
  }
#ifdef SHARDGYM_WITH_CUDA
  if (on_cuda(t)) {
    kernels::pack_cuda(t.data_ptr<float>(), rows, cols, r, dst.data_ptr<float>(),
                       c10::cuda::getCurrentCUDAStream(t.device().index()).stream());
    return;
  }
#endif
  if (t.scalar_type() == at::kFloat) {
    kernels::pack(t.data_ptr<float>(), rows, cols, r, dst.data_ptr<float>());
  } else {
    kernels::pack(t.data_ptr<double>(), rows, cols, r, dst.data_ptr<double>());
  }
}

// Writes src[0, cell.numel()) into `cell` of t.
void unpack_cell(const at::Tensor& src, at::Tensor& t, const Box& t_box, const Box& cell) {
  kernels::Region r;
  int64_t rows = 0, cols = 0;
  if (!as_region(t, t_box, cell, r, rows, cols) || src.scalar_type() != t.scalar_type() ||
      src.device() != t.device() || !src.is_contiguous()) {
    at::Tensor dst = view_of(t, t_box, cell);
    dst.copy_(src.view(dst.sizes()));
    return;
  }
#ifdef SHARDGYM_WITH_CUDA
  if (on_cuda(t)) {
    kernels::unpack_cuda(src.data_ptr<float>(), t.data_ptr<float>(), rows, cols, r,
                         c10::cuda::getCurrentCUDAStream(t.device().index()).stream());
    return;
  }
#endif
  if (t.scalar_type() == at::kFloat) {
    kernels::unpack(src.data_ptr<float>(), t.data_ptr<float>(), rows, cols, r);
  } else {
    kernels::unpack(src.data_ptr<double>(), t.data_ptr<double>(), rows, cols, r);
  }
}

// Sorted distinct cut points of dimension d over every box of the item.
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

}  // namespace

std::vector<std::vector<int>> tournament_rounds(int world) {
  const int n = world % 2 == 0 ? world : world + 1;
  std::vector<std::vector<int>> rounds;
  for (int r = 0; r + 1 < n; ++r) {
    std::vector<int> partner(n, -1);
    partner[n - 1] = r;
    partner[r] = n - 1;
    for (int k = 1; k < n / 2; ++k) {
      const int a = (r + k) % (n - 1), b = (r - k + n - 1) % (n - 1);
      partner[a] = b;
      partner[b] = a;
    }
    partner.resize(world);
    for (int& p : partner)
      if (p >= world) p = -1;
    rounds.push_back(std::move(partner));
  }
  return rounds;
}

ExchangePlan::ExchangePlan(std::vector<ExchangeItem> items, int rank, int world)
    : items_(std::move(items)), rank_(rank), world_(world), send_(world), recv_(world) {
  for (size_t k = 0; k < items_.size(); ++k) {
    const ExchangeItem& it = items_[k];
    if (static_cast<int>(it.have.size()) != world || static_cast<int>(it.want.size()) != world)
      throw std::invalid_argument("exchange item " + std::to_string(k) +
                                  ": need one have/want box per rank");
    std::vector<std::vector<int64_t>> all_cuts(it.full_shape.size());
    for (size_t d = 0; d < it.full_shape.size(); ++d) all_cuts[d] = cuts(it, static_cast<int>(d));
    for (int dst = 0; dst < world; ++dst) {
      for (Box& cell : grid_cells(it.want[dst], all_cuts)) {
        if (it.have[dst].contains(cell)) {
          if (dst == rank) local_.push_back({static_cast<int>(k), std::move(cell)});
          continue;
        }
        int src = -1;
        for (int q = 0; q < world; ++q) {
          if (q == dst || !it.have[q].contains(cell)) continue;
          if (src < 0 || std::abs(q - dst) < std::abs(src - dst)) src = q;
        }
        if (src < 0) {
          std::ostringstream m;
          m << "exchange item " << k << ": cell " << cell.to_string() << " wanted by rank " << dst
            << " is held by no rank";
          throw std::invalid_argument(m.str());
        }
        local_only_ = false;
        if (src == rank) send_[dst].push_back({static_cast<int>(k), cell});
        if (dst == rank) recv_[src].push_back({static_cast<int>(k), std::move(cell)});
      }
    }
  }
  for (int q = 0; q < world; ++q) {
    for (const Cell& c : recv_[q]) elements_received_ += c.box.numel();
    for (const Cell& c : send_[q]) elements_sent_ += c.box.numel();
  }
}

ExchangePlan ExchangePlan::reversed() const {
  std::vector<ExchangeItem> items = items_;
  for (auto& it : items) std::swap(it.have, it.want);
  return ExchangePlan(std::move(items), rank_, world_);
}

std::vector<at::Tensor> ExchangePlan::run(Comm& world, const std::vector<at::Tensor>& inputs) const {
  if (inputs.size() != items_.size())
    throw std::invalid_argument("exchange: " + std::to_string(inputs.size()) + " inputs for " +
                                std::to_string(items_.size()) + " items");
  if (world.size() != world_)
    throw std::invalid_argument("exchange: plan for " + std::to_string(world_) +
                                " ranks run on " + world.name());
  std::vector<at::Tensor> out(items_.size());
  for (size_t k = 0; k < items_.size(); ++k) {
    const Box& have = items_[k].have[rank_];
    if (inputs[k].sizes() != at::IntArrayRef(have.extents())) {
      std::ostringstream m;
      m << "exchange item " << k << ": input of shape " << inputs[k].sizes() << " for box "
        << have.to_string();
      throw std::invalid_argument(m.str());
    }
    if (inputs[k].scalar_type() != inputs[0].scalar_type())
      throw std::invalid_argument("exchange: items of different dtypes in one exchange");
    out[k] = at::empty(items_[k].want[rank_].extents(), inputs[k].options());
  }
  for (const Cell& c : local_) {
    const int k = c.item;
    view_of(out[k], items_[k].want[rank_], c.box)
        .copy_(view_of(inputs[k], items_[k].have[rank_], c.box));
  }
  if (local_only_) return out;
  const at::TensorOptions opts = inputs.empty() ? at::TensorOptions() : inputs[0].options();
  auto send_to = [&](int peer, int64_t n) {
    at::Tensor buf = at::empty({n}, opts);
    int64_t off = 0;
    for (const Cell& c : send_[peer]) {
      pack_cell(inputs[c.item], items_[c.item].have[rank_], c.box,
                buf.narrow(0, off, c.box.numel()));
      off += c.box.numel();
    }
    world.send(buf, peer);
  };
  auto recv_from = [&](int peer, int64_t n) {
    at::Tensor buf = at::empty({n}, opts);
    world.recv(buf, peer);
    int64_t off = 0;
    for (const Cell& c : recv_[peer]) {
      unpack_cell(buf.narrow(0, off, c.box.numel()), out[c.item], items_[c.item].want[rank_],
                  c.box);
      off += c.box.numel();
    }
  };
  for (const auto& round : tournament_rounds(world_)) {
    const int peer = round[rank_];
    if (peer < 0) continue;
    int64_t ns = 0, nr = 0;
    for (const Cell& c : send_[peer]) ns += c.box.numel();
    for (const Cell& c : recv_[peer]) nr += c.box.numel();
    if (rank_ < peer) {
      if (ns > 0) send_to(peer, ns);
      if (nr > 0) recv_from(peer, nr);
    } else {
      if (nr > 0) recv_from(peer, nr);
      if (ns > 0) send_to(peer, ns);
    }
  }
  return out;
}

}  // namespace shardgym::live
