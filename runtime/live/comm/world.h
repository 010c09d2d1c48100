// Choosing the backend of a rank's CommWorld: Gloo (CPU tensors, or CUDA tensors staged through
// the host when ranks share a GPU) or NCCL (one rank per GPU; CUDA builds only).
#pragma once

#include <memory>
#include <string>

#include <c10/util/intrusive_ptr.h>

#include "runtime/live/comm/comm.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace shardgym::live {

enum class CommBackend { kGloo, kNccl };

// "gloo" | "nccl"; throws std::invalid_argument naming the accepted values.
CommBackend parse_backend(const std::string& name);
const char* backend_name(CommBackend backend);

struct WorldOptions {
  CommBackend backend = CommBackend::kGloo;
  double timeout_s = 30;  // per collective and per rendezvous
  // Gloo: address this rank's device binds to; empty: this host's name (multi-machine runs).
  std::string hostname = "127.0.0.1";
  // LOCAL_RANK (-1: the rank): CommWorld::local_rank(); NCCL's GPU is local_cuda_index of it.
  int local_rank = -1;
  bool stage_copies = false;  // Gloo: GlooOptions::stage_copies (tests)
};

// Collective over all `world_size` ranks. NCCL in a CPU-only build throws
// std::invalid_argument before touching the store.
std::unique_ptr<CommWorld> make_comm_world(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                           int world_size, const WorldOptions& options);

}  // namespace shardgym::live
