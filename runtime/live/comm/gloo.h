// GlooCommWorld: runtime/live/comm/comm.h over c10d's ProcessGroupGloo (LibTorch 1.13).
//
// One GlooCommWorld per rank. It meets its peers through a c10d::Store (a HashStore shared by
// threads of one process, or a TCPStore across processes). Groups are created lazily, once per
// distinct rank set, under a store prefix derived from that set, so only the members of a
// group take part in creating it; members must ask for their common groups in the same order
// (SPMD code does). `create_standard_groups` creates every group the strategies of docs/design.md §3
// can use, in one canonical order, so that later look-ups never rendezvous.
//
// Gloo 1.13 has no reduce_scatter and no flat all-gather: reduce_scatter is an all_reduce
// followed by taking this rank's slice, all_gather is Gloo's list all-gather followed by a
// concatenation along `dim`.
//
// Every collective runs under the world's timeout (Gloo's context timeout and the store's);
// failure throws CommError "rank R: <op> on <group> failed: <cause>". Destroying a world
// closes its sockets, so peers blocked on this rank fail promptly instead of waiting it out.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "runtime/live/comm/comm.h"
#include "runtime/live/launch/group_sets.h"  // standard_group_sets

namespace c10d {
class Store;
}  // namespace c10d

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace shardgym::live {

struct GlooOptions {
  double timeout_s = 30;  // per collective and per rendezvous
  // Address this rank's Gloo device binds to; empty: this host's name (multi-machine runs).
  std::string hostname = "127.0.0.1";
  // Every collective works on a copy of its tensor and writes the result back, as it does for
  // CUDA tensors (staged through the host): runs those paths on the CPU (tests).
  bool stage_copies = false;
};

class GlooCommWorld : public CommWorld {
 public:
  // Collective over all `world_size` ranks: creates the world group.
  GlooCommWorld(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                GlooOptions options = {});
  ~GlooCommWorld() override;
  GlooCommWorld(const GlooCommWorld&) = delete;
  GlooCommWorld& operator=(const GlooCommWorld&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Comm& group(const std::vector<int>& ranks) override;
  Comm& world() override { return *world_comm_; }

  int groups_created() const { return groups_created_; }
  double timeout_s() const { return options_.timeout_s; }

 private:
  void wait_for_devices();  // every rank has its device, or throw naming the one without

  int rank_;
  int world_size_;
  GlooOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<::gloo::transport::Device> device_;  // shared by every group of this rank
  std::map<std::vector<int>, std::unique_ptr<Comm>> groups_;
  Comm* world_comm_ = nullptr;
  int groups_created_ = 0;
};

// Creates (collectively) every standard group that contains `world.rank()`.
void create_standard_groups(CommWorld& world);

// "[0,1,2]" for messages and store keys.
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace shardgym::live
