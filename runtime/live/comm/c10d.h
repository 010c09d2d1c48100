// Internal to runtime/live: the Comm of comm/comm.h over one c10d process group, shared by the Gloo
// (comm/gloo.cpp) and NCCL (comm/nccl.cpp) worlds. `PG` is the backend class itself
// (c10d::ProcessGroupGloo, c10d::ProcessGroupNCCL): LibTorch 1.13's derive from ProcessGroup,
// 2.x's from Backend, and both offer the calls used here, so the backend object is called
// directly (docs/design.md §7).
//
// What differs between backends are three hooks: `to_wire` (the tensor the backend works on:
// Gloo stages CUDA tensors through the host), `before` and `after` (NCCL synchronises the
// device around a collective so that wall-clock waits cover the communication and not the
// compute queued before it; see comm/nccl.cpp), and the flat all-gather / reduce-scatter,
// which are built from all_gather and all_reduce here and native in NCCL.
//
// Length: a template over the backend class, so its definitions live in the header.
#pragma once

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "runtime/live/comm/comm.h"

namespace shardgym::live::detail {

using Clock = std::chrono::steady_clock;

inline std::string cause_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

inline double elapsed_s(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double nbytes(const at::Tensor& t) {
  return static_cast<double>(t.numel() * t.element_size());
}

// Writes a collective's result into the caller's tensor the way a backend reducing in place
// does: below autograd. Recorded by autograd, the copy would become the tensor's history in
// place of the mapping that produced it (an overlapped g's StartReduce), and the gradient of
// everything before it would be zero; it would also count as an in-place modification.
inline void write_back(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.is_same(src)) return;
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor d = dst;
  d.copy_(src);
}

inline std::chrono::milliseconds to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
}

std::string format_group(const std::vector<int>& ranks);  // "group[0,1]" / "self[2]"

// Checks a CommWorld::group() argument (sorted, unique, inside the world, containing `rank`)
// and returns `rank`'s index inside it; throws std::invalid_argument naming the group.
int group_rank_of(const std::vector<int>& ranks, int rank, int world_size);
// [0, 1, ..., world_size - 1]
std::vector<int> all_ranks(int world_size);

// Shared by every Comm kind: identity, names, argument checks.
class CommBase : public Comm {
 public:
  CommBase(int global_rank, std::vector<int> ranks)
      : global_rank_(global_rank), ranks_(std::move(ranks)) {
    rank_ =
        static_cast<int>(std::find(ranks_.begin(), ranks_.end(), global_rank_) - ranks_.begin());
    name_ = format_group(ranks_);
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  std::string name() const override { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

 protected:
  int64_t checked_dim(const at::Tensor& t, int64_t dim, const char* op) const {
    const int64_t nd = t.dim();
    if (dim < -nd || dim >= nd) {
      std::ostringstream m;
      m << "rank " << global_rank_ << ": " << op << " on " << name_ << ": dim " << dim
        << " out of range for a " << nd << "-d tensor";
      throw std::invalid_argument(m.str());
    }
    return dim < 0 ? dim + nd : dim;
  }
  void check_divisible(const at::Tensor& t, int64_t dim, const char* op) const {
    if (t.size(dim) % size() != 0) {
      std::ostringstream m;
      m << "rank " << global_rank_ << ": " << op << " on " << name_ << ": size " << t.size(dim)
        << " of dim " << dim << " is not divisible by the group size " << size();
      throw std::invalid_argument(m.str());
    }
  }
  void check_peer(int peer, const char* op) const {
    if (peer < 0 || peer >= size() || peer == rank_) {
      std::ostringstream m;
      m << "rank " << global_rank_ << ": " << op << " on " << name_ << ": invalid peer " << peer
        << " (group size " << size() << ", own rank " << rank_ << ")";
      throw std::invalid_argument(m.str());
    }
  }

  int global_rank_;
  int rank_ = 0;
  std::vector<int> ranks_;
  std::string name_;
};

// A group of one rank: every collective is local.
class SelfComm : public CommBase {
 public:
  using CommBase::CommBase;
  void all_reduce(at::Tensor&) override {}
  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override {
    checked_dim(t, dim, "all_gather");
    return t.clone(at::MemoryFormat::Contiguous);
  }
  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) override {
    checked_dim(t, dim, "reduce_scatter");
    return t.clone(at::MemoryFormat::Contiguous);
  }
  void broadcast(at::Tensor&, int root) override {
    if (root != 0) check_peer(root, "broadcast");
  }
  void send(const at::Tensor&, int peer) override { check_peer(peer, "send"); }
  void recv(at::Tensor&, int peer) override { check_peer(peer, "recv"); }
  void barrier() override {}
};

template <class PG>
class C10dWork;


template <class PG>
class C10dComm : public CommBase {
 public:
  C10dComm(int global_rank, std::vector<int> ranks, c10::intrusive_ptr<PG> pg,
           std::chrono::milliseconds timeout)
      : CommBase(global_rank, std::move(ranks)), pg_(std::move(pg)), timeout_(timeout) {}

  void all_reduce(at::Tensor& t) override {
    finish_staged();
    before();
    const auto t0 = Clock::now();
    const double p = size();
    std::vector<at::Tensor> v{to_wire(t)};
    run("all_reduce", [&] { return pg_->allreduce(v); });
    after();
    write_back(t, v[0]);
    account(t0, 2 * (p - 1) / p * nbytes(t));
  }

  std::unique_ptr<CommWork> all_reduce_async(at::Tensor& t) override {
    before();
    const double p = size();
    std::vector<at::Tensor> v{to_wire(t)};
    auto work = start("all_reduce_async", [&] { return pg_->allreduce(v); });
    stats_.bytes += 2 * (p - 1) / p * nbytes(t);
    stats_.calls += 1;
    stats_.async_calls += 1;
    auto handle = std::make_unique<C10dWork<PG>>(*this, std::move(work), t, v[0]);
    if (!t.is_same(v[0])) inflight_.push_back(handle.get());
    return handle;
  }

  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override {
    dim = checked_dim(t, dim, "all_gather");
    finish_staged();
    before();
    const auto t0 = Clock::now();
    std::vector<at::Tensor> in{to_wire(t)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int i = 0; i < size(); ++i) out[0].push_back(at::empty_like(in[0]));
    run("all_gather", [&] { return pg_->allgather(out, in); });
    after();
    at::Tensor result = at::cat(out[0], dim).to(t.device());
    account(t0, (size() - 1) * nbytes(t));
    return result;
  }

  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) override {
    dim = checked_dim(t, dim, "reduce_scatter");
    check_divisible(t, dim, "reduce_scatter");
    finish_staged();
    before();
    const auto t0 = Clock::now();
    const double p = size();
    at::Tensor wire = to_wire(t);
    std::vector<at::Tensor> v{wire.is_same(t) ? t.clone(at::MemoryFormat::Contiguous) : wire};
    run("reduce_scatter", [&] { return pg_->allreduce(v); });
    after();
    const int64_t part = t.size(dim) / size();
    at::Tensor result =
        v[0].narrow(dim, rank_ * part, part).to(t.device(), /*non_blocking=*/false, /*copy=*/true,
                                                 at::MemoryFormat::Contiguous);
    account(t0, 2 * (p - 1) / p * nbytes(t));  // all_reduce underneath
    return result;
  }

  void broadcast(at::Tensor& t, int root) override {
    if (root != rank_) check_peer(root, "broadcast");
    finish_staged();
    before();
    const auto t0 = Clock::now();
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = timeout_;
    std::vector<at::Tensor> v{to_wire(t)};
    run("broadcast", [&] { return pg_->broadcast(v, opts); });
    after();
    write_back(t, v[0]);
    account(t0, rank_ == root ? nbytes(t) : 0);
  }

  void send(const at::Tensor& t, int peer) override {
    check_peer(peer, "send");
    finish_staged();
    before();
    const auto t0 = Clock::now();
    std::vector<at::Tensor> v{to_wire(t)};
    run("send", [&] { return pg_->send(v, peer, /*tag=*/0); });
    after();
    account(t0, nbytes(t));
  }

  void recv(at::Tensor& t, int peer) override {
    check_peer(peer, "recv");
    finish_staged();
    before();
    const auto t0 = Clock::now();
    std::vector<at::Tensor> v{to_wire_empty(t)};
    run("recv", [&] { return pg_->recv(v, peer, /*tag=*/0); });
    after();
    write_back(t, v[0]);
    account(t0, 0);
  }

  void batch_p2p(std::vector<P2POp>& ops) override {
    for (const P2POp& op : ops) check_peer(op.peer, op.send ? "send" : "recv");
    // Posted in an order that also suits a backend running each pair's operations one after
    // another (NCCL's stream per peer): towards a higher peer sends first, towards a lower one
    // receives first, so the two sides of a pair post matching operations.
    std::stable_sort(ops.begin(), ops.end(), [&](const P2POp& a, const P2POp& b) {
      const bool a_first = a.send == (a.peer > rank_), b_first = b.send == (b.peer > rank_);
      return a_first && !b_first;
    });
    finish_staged();
    before();
    const auto t0 = Clock::now();
    std::vector<std::vector<at::Tensor>> wires;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    wires.reserve(ops.size());
    double sent = 0;
    for (const P2POp& op : ops) {
      wires.push_back({op.send ? to_wire(op.tensor) : to_wire_empty(op.tensor)});
      auto& v = wires.back();
      works.push_back(op.send ? start("send", [&] { return pg_->send(v, op.peer, /*tag=*/0); })
                              : start("recv", [&] { return pg_->recv(v, op.peer, /*tag=*/0); }));
      if (op.send) sent += nbytes(op.tensor);
    }
    for (size_t i = 0; i < ops.size(); ++i) finish(ops[i].send ? "send" : "recv", *works[i]);
    after();
    for (size_t i = 0; i < ops.size(); ++i)
      if (!ops[i].send) write_back(ops[i].tensor, wires[i][0]);
    account(t0, sent);
  }

  void barrier() override {
    finish_staged();
    before();
    const auto t0 = Clock::now();
    c10d::BarrierOptions opts;
    opts.timeout = timeout_;
    run("barrier", [&] { return pg_->barrier(opts); });
    after();
    account(t0, 0);
  }

 protected:
  friend class C10dWork<PG>;

  // The tensor the backend reads and writes in place of `t`: `t` itself when the backend can
  // use it, else a contiguous copy (and, for Gloo, a host copy of a CUDA tensor).
  virtual at::Tensor to_wire(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
  // The same for a tensor that is only written (recv): no copy of its contents.
  virtual at::Tensor to_wire_empty(const at::Tensor& t) {
    return t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
  }
  virtual void before() {}
  virtual void after() {}

  // Waits for every staged all-reduce still in flight, oldest first (see inflight_). Each is
  // taken off the list before it is waited, so a failure leaves no waited handle behind.
  void finish_staged() {
    std::vector<C10dWork<PG>*> all;
    all.swap(inflight_);
    for (C10dWork<PG>* p : all) p->wait_self();
  }
  // Takes `w` and the staged all-reduces started before it off the list and waits for those,
  // oldest first (all of the list when `w` is not on it).
  void finish_staged_before(C10dWork<PG>* w) {
    auto& v = inflight_;
    const auto it = std::find(v.begin(), v.end(), w);
    std::vector<C10dWork<PG>*> before(v.begin(), it);
    v.erase(v.begin(), it == v.end() ? it : it + 1);
    for (C10dWork<PG>* p : before) p->wait_self();
  }
  void forget(C10dWork<PG>* w) {
    inflight_.erase(std::remove(inflight_.begin(), inflight_.end(), w), inflight_.end());
  }
  // Staged asynchronous all-reduces (their result reaches the caller's tensor only in wait()),
  // in the order started. Callers may rely on "collectives of one group complete in the order
  // started" and wait only for the last handle, or run a blocking collective after them; so a
  // wait, or a blocking collective, first finishes every staged all-reduce started before it.
  std::vector<C10dWork<PG>*> inflight_;

  template <typename Launch>
  void run(const char* op, Launch&& launch) {
    c10::intrusive_ptr<c10d::Work> work = start(op, std::forward<Launch>(launch));
    finish(op, *work);
  }
  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> start(const char* op, Launch&& launch) {
    try {
      return launch();
    } catch (const std::exception& e) {
      throw failure(op, e);
    }
  }
  void finish(const char* op, c10d::Work& work) {
    try {
      // The backend's own timeout normally fires first and carries the better message;
      // the wait bound is the backstop.
      if (!work.wait(timeout_ + std::chrono::milliseconds(500))) {
        throw std::runtime_error("aborted");
      }
    } catch (const std::exception& e) {
      throw failure(op, e);
    }
  }
  CommError failure(const char* op, const std::exception& e) const {
    std::ostringstream m;
    m << "rank " << global_rank_ << ": " << op << " on " << name_ << " failed: " << cause_of(e);
    return CommError(m.str());
  }
  void account(Clock::time_point t0, double bytes) {
    stats_.wait_s += elapsed_s(t0);
    stats_.bytes += bytes;
    stats_.calls += 1;
  }

  c10::intrusive_ptr<PG> pg_;
  std::chrono::milliseconds timeout_;
};

// An all-reduce started by C10dComm::all_reduce_async. `buffer` is what the backend reduces in
// place; when it is not the caller's tensor (a contiguous or host copy) it is written back on
// wait().
template <class PG>
class C10dWork : public CommWork {
 public:
  C10dWork(C10dComm<PG>& comm, c10::intrusive_ptr<c10d::Work> work, at::Tensor target,
           at::Tensor buffer)
      : comm_(comm),
        work_(std::move(work)),
        target_(std::move(target)),
        buffer_(std::move(buffer)),
        started_(Clock::now()) {}

  ~C10dWork() override { comm_.forget(this); }

  void wait() override {
    if (waited_) return;
    comm_.finish_staged_before(this);
    wait_self();
  }
  // wait() without first finishing the staged all-reduces started before this one.
  void wait_self() {
    if (waited_) return;
    waited_ = true;
    const auto t0 = Clock::now();
    CommStats& st = comm_.stats_;
    st.async_in_flight_s += std::chrono::duration<double>(t0 - started_).count();
    if (work_->isCompleted()) st.async_done_before_wait += 1;
    try {
      comm_.finish("all_reduce_async", *work_);
      comm_.after();
    } catch (...) {
      st.wait_s += elapsed_s(t0);
      throw;
    }
    write_back(target_, buffer_);
    st.wait_s += elapsed_s(t0);
  }
  bool completed() override { return waited_ || work_->isCompleted(); }

 private:
  C10dComm<PG>& comm_;
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor target_, buffer_;
  Clock::time_point started_;
  bool waited_ = false;
};

}  // namespace shardgym::live::detail
