#include "runtime/live/comm/nccl.h"

#include "runtime/live/comm/c10d.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/live/comm/gloo.h"  // format_ranks

namespace shardgym::live {
namespace {

using detail::cause_of;
using detail::to_ms;

class NcclComm : public detail::C10dComm<c10d::ProcessGroupNCCL> {
 public:
  NcclComm(int global_rank, std::vector<int> ranks, c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg,
           std::chrono::milliseconds timeout, at::Device device)
      : C10dComm(global_rank, std::move(ranks), std::move(pg), timeout), device_(device) {}

  bool native_reduce_scatter() const override { return true; }

  // NCCL's flat collectives work on dim 0: other dims are moved there and back.
  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override {
    dim = checked_dim(t, dim, "all_gather");
    before();
    const auto t0 = detail::Clock::now();
    at::Tensor in = to_wire(dim == 0 ? t : t.movedim(dim, 0).contiguous());
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] *= size();
    at::Tensor out = at::empty(shape, in.options());
    run("all_gather", [&] { return pg_->_allgather_base(out, in); });
    after();
    at::Tensor result = dim == 0 ? out : out.movedim(0, dim).contiguous();
    account(t0, (size() - 1) * detail::nbytes(t));
    return result.to(t.device());
  }

  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) override {
    dim = checked_dim(t, dim, "reduce_scatter");
    check_divisible(t, dim, "reduce_scatter");
    before();
    const auto t0 = detail::Clock::now();
    const double p = size();
    at::Tensor in = to_wire(dim == 0 ? t : t.movedim(dim, 0).contiguous());
    std::vector<int64_t> shape = in.sizes().vec();
    shape[0] /= size();
    at::Tensor out = at::empty(shape, in.options());
    run("reduce_scatter", [&] { return pg_->_reduce_scatter_base(out, in); });
    after();
    at::Tensor result = dim == 0 ? out : out.movedim(0, dim).contiguous();
    account(t0, (p - 1) / p * detail::nbytes(t));
    return result.to(t.device());
  }

 protected:
  at::Tensor to_wire(const at::Tensor& t) override {
    if (!t.is_cuda())
      return t.to(device_, /*non_blocking=*/false, /*copy=*/true, at::MemoryFormat::Contiguous);
    return C10dComm::to_wire(t);
  }
  at::Tensor to_wire_empty(const at::Tensor& t) override {
    if (!t.is_cuda()) return at::empty(t.sizes(), t.options().device(device_));
    return C10dComm::to_wire_empty(t);
  }
  void before() override { sync(); }
  void after() override { sync(); }

 private:
  void sync() {
    c10::cuda::CUDAGuard guard(device_);
    c10::cuda::getCurrentCUDAStream(device_.index()).synchronize();
  }
  at::Device device_;
};

}  // namespace

NcclCommWorld::NcclCommWorld(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                             int world_size, NcclOptions options)
    : rank_(rank), world_size_(world_size), options_(std::move(options)), store_(store) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("NcclCommWorld: rank " + std::to_string(rank) +
                                " outside a world of " + std::to_string(world_size));
  }
  if (!(options_.timeout_s > 0)) {
    throw std::invalid_argument("NcclCommWorld: timeout_s must be positive");
  }
  const int n = static_cast<int>(c10::cuda::device_count());
  if (options_.device_index < 0 || options_.device_index >= n) {
    throw std::invalid_argument("rank " + std::to_string(rank) + ": CUDA device " +
                                std::to_string(options_.device_index) + " does not exist (" +
                                std::to_string(n) + " visible)");
  }
  // A collective whose peer is gone throws after the timeout instead of blocking the stream.
  setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(options_.device_index));
  store_->setTimeout(to_ms(options_.timeout_s));
  const std::vector<int> all = detail::all_ranks(world_size);
  world_comm_ = &group(all);
  static_cast<detail::CommBase*>(world_comm_)->set_name("world" + format_ranks(all));
}

NcclCommWorld::~NcclCommWorld() { groups_.clear(); }

Comm& NcclCommWorld::group(const std::vector<int>& ranks) {
  auto it = groups_.find(ranks);
  if (it != groups_.end()) return *it->second;
  const int group_rank = detail::group_rank_of(ranks, rank_, world_size_);
  std::unique_ptr<Comm> comm;
  if (ranks.size() == 1 && !options_.nccl_singletons) {
    comm = std::make_unique<detail::SelfComm>(rank_, ranks);
  } else {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = to_ms(options_.timeout_s);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("n" + format_ranks(ranks), store_);
    c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg;
    try {
      pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, group_rank,
                                                       static_cast<int>(ranks.size()), opts);
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(rank_) + ": creating NCCL group " +
                      format_ranks(ranks) + " failed: " + cause_of(e));
    }
    comm = std::make_unique<NcclComm>(
        rank_, ranks, std::move(pg), to_ms(options_.timeout_s),
        at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(options_.device_index)));
  }
  Comm& ref = *comm;
  groups_.emplace(ranks, std::move(comm));
  return ref;
}

}  // namespace shardgym::live
