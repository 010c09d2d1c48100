// Comm: one rank's handle on one process group, as the TP layers see it.
//
// Every collective takes the group explicitly (STYLE.md §5: never a global). Implementations
// wrap c10d (Gloo on CPU, NCCL with CUDA); reduce_scatter and flat all_gather are built from
// all_reduce / all_gather where the backend lacks them (Gloo in LibTorch 1.13).
// A collective that fails or exceeds the world's timeout throws CommError naming the rank,
// the group and the operation; the rank's loop turns it into an error value (STYLE.md §7).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

namespace shardgym::live {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Timing of the collectives of one rank, read by the meters.
struct CommStats {
  double wait_s = 0;  // wall time spent inside collectives
  double bytes = 0;   // bytes this rank sent (ring estimate)
  int calls = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;  // rank inside this group
  virtual int size() const = 0;
  virtual const std::vector<int>& global_ranks() const = 0;
  virtual std::string name() const = 0;  // "tp[0,1,2,3]" for messages

  // Sum over the group, in place. Identity when size() == 1.
  virtual void all_reduce(at::Tensor& t) = 0;
  // Concatenation of every rank's `t` along `dim` (rank order).
  virtual at::Tensor all_gather(const at::Tensor& t, int64_t dim) = 0;
  // Sum over the group, then this rank's 1/size slice along `dim` (dim must divide).
  virtual at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) = 0;
  // Every rank gets root's tensor (root: rank inside the group).
  virtual void broadcast(at::Tensor& t, int root) = 0;
  // Point-to-point, for repartitioning (peer: rank inside the group).
  virtual void send(const at::Tensor& t, int peer) = 0;
  virtual void recv(at::Tensor& t, int peer) = 0;
  virtual void barrier() = 0;

  CommStats& stats() { return stats_; }

 protected:
  CommStats stats_;
};

// The groups of one rank, created once per distinct rank set and cached (creating a c10d
// group is collective: every member must ask for it in the same order).
class CommWorld {
 public:
  virtual ~CommWorld() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Group over `ranks` (sorted global ranks that include rank()).
  virtual Comm& group(const std::vector<int>& ranks) = 0;
  virtual Comm& world() = 0;
};

}  // namespace shardgym::live
