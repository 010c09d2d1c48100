#include "runtime/live/comm/world.h"

#include <stdexcept>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/live/comm/gloo.h"
#include "runtime/live/comm/device.h"
#ifdef SHARDGYM_WITH_CUDA
#include "runtime/live/comm/nccl.h"
#endif

namespace shardgym::live {

CommBackend parse_backend(const std::string& name) {
  if (name == "gloo") return CommBackend::kGloo;
  if (name == "nccl") return CommBackend::kNccl;
  throw std::invalid_argument("backend '" + name + "': expected gloo or nccl");
}

const char* backend_name(CommBackend backend) {
  return backend == CommBackend::kNccl ? "nccl" : "gloo";
}

namespace {

std::unique_ptr<CommWorld> make_backend_world(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int world_size,
                                              const WorldOptions& options) {
  if (options.backend == CommBackend::kNccl) {
#ifdef SHARDGYM_WITH_CUDA
    NcclOptions o;
    o.timeout_s = options.timeout_s;
    o.device_index = local_cuda_index(options.local_rank < 0 ? rank : options.local_rank);
    return std::make_unique<NcclCommWorld>(store, rank, world_size, o);
#else
    throw std::invalid_argument(
        "backend nccl needs a CUDA build of ShardGym (scripts/build_cuda.sh); this one is "
        "CPU-only");
#endif
  }
  GlooOptions o;
  o.timeout_s = options.timeout_s;
  o.hostname = options.hostname;
  o.stage_copies = options.stage_copies;
  return std::make_unique<GlooCommWorld>(store, rank, world_size, o);
}

}  // namespace

std::unique_ptr<CommWorld> make_comm_world(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                           int world_size, const WorldOptions& options) {
  std::unique_ptr<CommWorld> world = make_backend_world(store, rank, world_size, options);
  world->set_local_rank(options.local_rank);
  return world;
}

}  // namespace shardgym::live
