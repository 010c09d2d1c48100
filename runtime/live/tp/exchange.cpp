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
    : items_(std::move(items)), rank_(rank), world_(world) {
  for (size_t k = 0; k < items_.size(); ++k)
    if (static_cast<int>(items_[k].have.size()) != world ||
        static_cast<int>(items_[k].want.size()) != world)
      throw std::invalid_argument("exchange item " + std::to_string(k) +
                                  ": need one have/want box per rank");
  x_ = plan_rank_exchange(items_, rank, world);
}

ExchangePlan ExchangePlan::reversed() const {
  std::vector<ExchangeItem> items = items_;
  for (auto& it : items) std::swap(it.have, it.want);
  return ExchangePlan(std::move(items), rank_, world_);
}

std::vector<at::Tensor> ExchangePlan::run(Comm& world, const std::vector<at::Tensor>& inputs,
                                          bool keep_unchanged) const {
  if (inputs.size() != items_.size())
    throw std::invalid_argument("exchange: " + std::to_string(inputs.size()) + " inputs for " +
                                std::to_string(items_.size()) + " items");
  if (world.size() != world_)
    throw std::invalid_argument("exchange: plan for " + std::to_string(world_) +
                                " ranks run on " + world.name());
  std::vector<at::Tensor> out(items_.size());
  bool keep = keep_unchanged;  // this rank keeps every box: it only sends
  for (size_t k = 0; keep && k < items_.size(); ++k)
    keep = items_[k].want[rank_] == items_[k].have[rank_];
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
    out[k] = keep ? inputs[k] : at::empty(items_[k].want[rank_].extents(), inputs[k].options());
  }
  if (!keep) {  // else out holds the inputs
    for (const ExchangeCell& c : x_.local) {
      const int k = c.item;
      view_of(out[k], items_[k].want[rank_], c.box)
          .copy_(view_of(inputs[k], items_[k].have[rank_], c.box));
    }
  }
  if (x_.local_only) return out;
  const at::TensorOptions opts = inputs.empty() ? at::TensorOptions() : inputs[0].options();
  auto send_to = [&](int peer, int64_t n) {
    at::Tensor buf = at::empty({n}, opts);
    int64_t off = 0;
    for (const ExchangeCell& c : x_.send[peer]) {
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
    for (const ExchangeCell& c : x_.recv[peer]) {
      unpack_cell(buf.narrow(0, off, c.box.numel()), out[c.item], items_[c.item].want[rank_],
                  c.box);
      off += c.box.numel();
    }
  };
  for (const auto& round : tournament_rounds(world_)) {
    const int peer = round[rank_];
    if (peer < 0) continue;
    int64_t ns = 0, nr = 0;
    for (const ExchangeCell& c : x_.send[peer]) ns += c.box.numel();
    for (const ExchangeCell& c : x_.recv[peer]) nr += c.box.numel();
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
