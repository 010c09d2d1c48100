#include "runtime/live/comm/gloo.h"

#include "runtime/live/comm/c10d.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace shardgym::live {
namespace {

constexpr const char* kDeviceReadyKey = "devices_ready";
constexpr const char* kDeviceFailedKey = "device_failed";
constexpr std::chrono::microseconds kDevicePoll{5000};

using detail::cause_of;
using detail::to_ms;

// Gloo in LibTorch runs its collectives on host memory: a CUDA tensor (rank processes sharing
// one GPU) goes through a host copy each way. Its wall-clock cost is counted as communication;
// NCCL (comm/nccl.cpp) is the backend for one rank per GPU.
class GlooComm : public detail::C10dComm<c10d::ProcessGroupGloo> {
 public:
  GlooComm(int global_rank, std::vector<int> ranks, c10::intrusive_ptr<c10d::ProcessGroupGloo> pg,
           std::chrono::milliseconds timeout, bool stage_copies)
      : C10dComm(global_rank, std::move(ranks), std::move(pg), timeout),
        stage_copies_(stage_copies) {}


 protected:
  at::Tensor to_wire(const at::Tensor& t) override {
    if (t.is_cuda() || stage_copies_) {
      return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true, at::MemoryFormat::Contiguous);
    }
    return C10dComm::to_wire(t);
  }
  at::Tensor to_wire_empty(const at::Tensor& t) override {
    if (t.is_cuda() || stage_copies_) return at::empty(t.sizes(), t.options().device(at::kCPU));
    return C10dComm::to_wire_empty(t);
  }

 private:
  bool stage_copies_;
};

}  // namespace

std::string format_ranks(const std::vector<int>& ranks) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? "," : "") << ranks[i];
  s << ']';
  return s.str();
}

GlooCommWorld::GlooCommWorld(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                             GlooOptions options)
    : rank_(rank), world_size_(world_size), options_(std::move(options)), store_(store) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("GlooCommWorld: rank " + std::to_string(rank) +
                                " outside a world of " + std::to_string(world_size));
  }
  if (!(options_.timeout_s > 0)) {
    throw std::invalid_argument("GlooCommWorld: timeout_s must be positive");
  }
  store_->setTimeout(to_ms(options_.timeout_s));
  try {
    device_ = options_.hostname.empty()
                  ? c10d::ProcessGroupGloo::createDefaultDevice()
                  : c10d::ProcessGroupGloo::createDeviceForHostname(options_.hostname);
  } catch (const std::exception& e) {
    const std::string why = "rank " + std::to_string(rank) + ": cannot create a Gloo device on '" +
                            options_.hostname + "': " + cause_of(e);
    try {  // the peers read it in wait_for_devices() and fail at once, naming this rank
      store_->set(kDeviceFailedKey, std::vector<uint8_t>(why.begin(), why.end()));
    } catch (const std::exception&) {
      // The store is gone too: the peers' own timeouts end them.
    }
    throw CommError(why);
  }
  wait_for_devices();
  const std::vector<int> all = detail::all_ranks(world_size);
  world_comm_ = &group(all);
  static_cast<detail::CommBase*>(world_comm_)->set_name("world" + format_ranks(all));
}

// Before any group's rendezvous, every rank says that it has its device (a count in the
// store) or why not (kDeviceFailedKey). A rank that cannot create its device would otherwise
// leave its peers waiting out timeout_s in the world group's rendezvous, allowed up to a day.
void GlooCommWorld::wait_for_devices() {
  store_->add(kDeviceReadyKey, 1);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.timeout_s);
  for (auto pause = std::chrono::microseconds(200);; pause = std::min(2 * pause, kDevicePoll)) {
    if (store_->check({kDeviceFailedKey})) {
      const std::vector<uint8_t> v = store_->get(kDeviceFailedKey);
      throw CommError("rank " + std::to_string(rank_) + ": a peer cannot start (" +
                      std::string(v.begin(), v.end()) + ")");
    }
    const int64_t ready = store_->add(kDeviceReadyKey, 0);
    if (ready >= world_size_) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw CommError("rank " + std::to_string(rank_) + ": only " + std::to_string(ready) +
                      " of " + std::to_string(world_size_) +
                      " ranks created their Gloo device within timeout_s = " +
                      std::to_string(options_.timeout_s) + " s");
    }
    std::this_thread::sleep_for(pause);
  }
}

GlooCommWorld::~GlooCommWorld() {
  // Groups first (their worker threads use the device), then the device.
  groups_.clear();
  device_.reset();
}

Comm& GlooCommWorld::group(const std::vector<int>& ranks) {
  auto it = groups_.find(ranks);
  if (it != groups_.end()) return *it->second;
  const int group_rank = detail::group_rank_of(ranks, rank_, world_size_);
  std::unique_ptr<Comm> comm;
  if (ranks.size() == 1) {
    comm = std::make_unique<detail::SelfComm>(rank_, ranks);
  } else {
    auto opts = c10d::ProcessGroupGloo::Options::create(to_ms(options_.timeout_s));
    opts->devices.push_back(device_);
    // One worker thread per group: its collectives (async ones included) run one at a time,
    // in the order started, which is the same on every member.
    opts->threads = 1;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("g" + format_ranks(ranks), store_);
    c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
    try {
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, group_rank,
                                                       static_cast<int>(ranks.size()), opts);
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(rank_) + ": creating group " + format_ranks(ranks) +
                      " failed: " + cause_of(e));
    }
    comm = std::make_unique<GlooComm>(rank_, ranks, std::move(pg), to_ms(options_.timeout_s),
                                      options_.stage_copies);
    ++groups_created_;
  }
  Comm& ref = *comm;
  groups_.emplace(ranks, std::move(comm));
  return ref;
}

void create_standard_groups(CommWorld& world) {
  for (const auto& g : standard_group_sets(world.world_size())) {
    if (std::binary_search(g.begin(), g.end(), world.rank())) world.group(g);
  }
}

}  // namespace shardgym::live
