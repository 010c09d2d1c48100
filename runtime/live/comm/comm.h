// Comm: one rank's handle on one process group, as the TP layers see it.
//
// Every collective takes the group explicitly (never a global one). Implementations
// wrap c10d (Gloo on CPU, NCCL with CUDA); reduce_scatter and flat all_gather are built from
// all_reduce / all_gather where the backend lacks them (Gloo in LibTorch 1.13).
// A collective that fails or exceeds the world's timeout throws CommError naming the rank,
// the group and the operation; the rank's loop turns it into an error value.
// all_reduce_async splits one all-reduce into a start and a wait (CommWork) so that the
// caller can compute while it is in flight (ATP chunk overlap, tp/tp_block.cpp); its failure
// surfaces, as the same CommError, from wait().
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
  double wait_s = 0;  // wall time spent inside collectives (async: blocked in wait())
  double bytes = 0;   // bytes this rank sent (ring estimate)
  int calls = 0;      // every collective, async ones included
  // Asynchronous all-reduces: how many were started, and the time between each start and the
  // beginning of its wait() — time the collective was in flight while the caller did other
  // work. (The overlap actually gained is bounded by that and by how long the collective took.)
  int async_calls = 0;
  double async_in_flight_s = 0;
  int async_done_before_wait = 0;  // of those, already complete when wait() began: fully hidden
};

// A collective in flight, returned by Comm::all_reduce_async. Its tensor may be read only
// after wait(). wait() blocks until completion (bounded by the world's timeout), adds the time
// blocked to the owning Comm's CommStats and throws CommError naming rank, group and
// operation on failure; later calls return at once. Dropping a handle unwaited does not stop
// the collective (the backend keeps the tensor alive) but its result and error are lost.
// A handle must not outlive the Comm that made it.
class CommWork {
 public:
  virtual ~CommWork() = default;
  virtual void wait() = 0;
  virtual bool completed() = 0;  // without blocking
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
  // The same, started in the background: `t` holds the sum once the handle's wait() returns
  // and must not be touched before. Collectives of one group complete in the order started,
  // on every member. A backend without an asynchronous path (this default) finishes it here.
  virtual std::unique_ptr<CommWork> all_reduce_async(at::Tensor& t) {
    all_reduce(t);
    struct Done : CommWork {
      void wait() override {}
      bool completed() override { return true; }
    };
    return std::make_unique<Done>();
  }
  // Concatenation of every rank's `t` along `dim` (rank order).
  virtual at::Tensor all_gather(const at::Tensor& t, int64_t dim) = 0;
  // Sum over the group, then this rank's 1/size slice along `dim` (dim must divide).
  virtual at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) = 0;
  // Whether reduce_scatter is the backend's own collective (NCCL), moving (P-1)/P of the
  // tensor, rather than an all-reduce and a slice (Gloo), moving twice that.
  virtual bool native_reduce_scatter() const { return false; }
  // Every rank gets root's tensor (root: rank inside the group).
  virtual void broadcast(at::Tensor& t, int root) = 0;
  // Point-to-point, for repartitioning (peer: rank inside the group).
  virtual void send(const at::Tensor& t, int peer) = 0;
  virtual void recv(at::Tensor& t, int peer) = 0;
  // Several sends and receives posted together and then waited for together (Megatron-LM's
  // batched isend/irecv, p2p_communication.py): a pipeline stage sends its activation to the
  // next stage and receives a gradient from it in one call, so that two neighbours that both
  // send first cannot deadlock. Receives' tensors hold their messages when it returns. This
  // default runs one operation (more throw std::logic_error: it cannot post them together).
  struct P2POp {
    bool send = true;
    at::Tensor tensor;
    int peer = 0;
  };
  virtual void batch_p2p(std::vector<P2POp>& ops) {
    if (ops.size() > 1) throw std::logic_error(name() + ": no batched point-to-point");
    for (P2POp& op : ops) op.send ? send(op.tensor, op.peer) : recv(op.tensor, op.peer);
  }
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
  // This rank's index among the ranks of its machine (LOCAL_RANK), which picks its GPU; the
  // rank itself unless the launcher says otherwise (make_comm_world).
  int local_rank() const { return local_rank_ < 0 ? rank() : local_rank_; }
  void set_local_rank(int local_rank) { local_rank_ = local_rank; }
  // Group over `ranks` (sorted global ranks that include rank()).
  virtual Comm& group(const std::vector<int>& ranks) = 0;
  virtual Comm& world() = 0;

 private:
  int local_rank_ = -1;
};

}  // namespace shardgym::live
