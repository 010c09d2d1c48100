// NcclCommWorld: runtime/live/comm/comm.h over c10d's ProcessGroupNCCL, one rank per GPU
// (docs/design.md §7: GPU build, LibTorch of a PyTorch 2.x wheel). Compiled only with
// SHARDGYM_WITH_CUDA; `make_comm_world` (comm/world.h) is how the rest of the code asks for it.
//
// Rank r works on CUDA device `device_index` (by convention LOCAL_RANK); NCCL refuses two ranks
// on one GPU, so ranks that share a GPU use Gloo (comm/gloo.h), which stages through the host.
// Groups are created as in GlooCommWorld: once per distinct rank set, under a store prefix of
// that set; their NCCL communicators are set up by the members' first collective on them.
//
// Timing: every collective first synchronises the device, so the compute queued before it is
// not counted as communication, and synchronises again after the wait, so CommStats::wait_s is
// the wall time of the collective itself. An asynchronous all-reduce (chunk overlap) is
// enqueued on NCCL's stream after that first synchronisation and synchronised in wait().
// reduce_scatter and all_gather use NCCL's flat collectives along dim 0 (other dims are moved
// there and back). CPU tensors handed to a collective are copied to the device and back.
//
// Failures: every collective waits at most the world's timeout (TORCH_NCCL_BLOCKING_WAIT=1 is
// set unless the environment says otherwise), then throws CommError naming rank, group and
// operation.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "runtime/live/comm/comm.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace shardgym::live {

struct NcclOptions {
  double timeout_s = 30;  // per collective and per rendezvous
  int device_index = 0;   // this rank's GPU
  // Groups of one rank go through NCCL too instead of being local copies: exercises the
  // backend on a single GPU (tests); off in runs.
  bool nccl_singletons = false;
};

class NcclCommWorld : public CommWorld {
 public:
  // Collective over all `world_size` ranks: creates the world group.
  NcclCommWorld(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                NcclOptions options = {});
  ~NcclCommWorld() override;
  NcclCommWorld(const NcclCommWorld&) = delete;
  NcclCommWorld& operator=(const NcclCommWorld&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Comm& group(const std::vector<int>& ranks) override;
  Comm& world() override { return *world_comm_; }
  int device_index() const { return options_.device_index; }

 private:
  int rank_;
  int world_size_;
  NcclOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::map<std::vector<int>, std::unique_ptr<Comm>> groups_;
  Comm* world_comm_ = nullptr;
};

}  // namespace shardgym::live
