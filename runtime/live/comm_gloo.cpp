#include "runtime/live/comm_gloo.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace shardgym::live {
namespace {

using Clock = std::chrono::steady_clock;

std::string cause_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

double elapsed_s(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double nbytes(const at::Tensor& t) { return static_cast<double>(t.numel() * t.element_size()); }

// Shared by both Comm kinds: identity, names, argument checks.
class CommBase : public Comm {
 public:
  CommBase(int global_rank, std::vector<int> ranks)
      : global_rank_(global_rank), ranks_(std::move(ranks)) {
    rank_ =
        static_cast<int>(std::find(ranks_.begin(), ranks_.end(), global_rank_) - ranks_.begin());
    name_ = (ranks_.size() > 1 ? "group" : "self") + format_ranks(ranks_);
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

class GlooComm : public CommBase {
 public:
  GlooComm(int global_rank, std::vector<int> ranks, c10::intrusive_ptr<c10d::ProcessGroupGloo> pg,
           std::chrono::milliseconds timeout)
      : CommBase(global_rank, std::move(ranks)), pg_(std::move(pg)), timeout_(timeout) {}

  void all_reduce(at::Tensor& t) override {
    const auto t0 = Clock::now();
    const double p = size();
    if (t.is_contiguous()) {
      std::vector<at::Tensor> v{t};
      run("all_reduce", [&] { return pg_->allreduce(v); });
    } else {
      std::vector<at::Tensor> v{t.contiguous()};
      run("all_reduce", [&] { return pg_->allreduce(v); });
      t.copy_(v[0]);
    }
    account(t0, 2 * (p - 1) / p * nbytes(t));
  }

  std::unique_ptr<CommWork> all_reduce_async(at::Tensor& t) override;

  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override {
    dim = checked_dim(t, dim, "all_gather");
    const auto t0 = Clock::now();
    std::vector<at::Tensor> in{t.contiguous()};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int i = 0; i < size(); ++i) out[0].push_back(at::empty_like(in[0]));
    run("all_gather", [&] { return pg_->allgather(out, in); });
    at::Tensor result = at::cat(out[0], dim);
    account(t0, (size() - 1) * nbytes(t));
    return result;
  }

  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) override {
    dim = checked_dim(t, dim, "reduce_scatter");
    if (t.size(dim) % size() != 0) {
      std::ostringstream m;
      m << "rank " << global_rank_ << ": reduce_scatter on " << name_ << ": size " << t.size(dim)
        << " of dim " << dim << " is not divisible by the group size " << size();
      throw std::invalid_argument(m.str());
    }
    const auto t0 = Clock::now();
    const double p = size();
    std::vector<at::Tensor> v{t.clone(at::MemoryFormat::Contiguous)};
    run("reduce_scatter", [&] { return pg_->allreduce(v); });
    const int64_t part = t.size(dim) / size();
    at::Tensor result = v[0].narrow(dim, rank_ * part, part).clone(at::MemoryFormat::Contiguous);
    account(t0, 2 * (p - 1) / p * nbytes(t));  // all_reduce underneath
    return result;
  }

  void broadcast(at::Tensor& t, int root) override {
    if (root != rank_) check_peer(root, "broadcast");
    const auto t0 = Clock::now();
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = timeout_;
    std::vector<at::Tensor> v{t.is_contiguous() ? t : t.contiguous()};
    run("broadcast", [&] { return pg_->broadcast(v, opts); });
    if (!t.is_contiguous()) t.copy_(v[0]);
    account(t0, rank_ == root ? nbytes(t) : 0);
  }

  void send(const at::Tensor& t, int peer) override {
    check_peer(peer, "send");
    const auto t0 = Clock::now();
    std::vector<at::Tensor> v{t.contiguous()};
    run("send", [&] { return pg_->send(v, peer, /*tag=*/0); });
    account(t0, nbytes(t));
  }

  void recv(at::Tensor& t, int peer) override {
    check_peer(peer, "recv");
    const auto t0 = Clock::now();
    std::vector<at::Tensor> v{t.is_contiguous() ? t
                                                : at::empty_like(t, at::MemoryFormat::Contiguous)};
    run("recv", [&] { return pg_->recv(v, peer, /*tag=*/0); });
    if (!t.is_contiguous()) t.copy_(v[0]);
    account(t0, 0);
  }

  void barrier() override {
    const auto t0 = Clock::now();
    c10d::BarrierOptions opts;
    opts.timeout = timeout_;
    run("barrier", [&] { return pg_->barrier(opts); });
    account(t0, 0);
  }

 private:
  friend class GlooWork;

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
      // Gloo's own context timeout normally fires first and carries the better message;
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

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::chrono::milliseconds timeout_;
};

// An all-reduce started by GlooComm::all_reduce_async. `buffer` is what Gloo reduces in place;
// when the caller's tensor is not contiguous it is a contiguous copy, written back on wait().
class GlooWork : public CommWork {
 public:
  GlooWork(GlooComm& comm, c10::intrusive_ptr<c10d::Work> work, at::Tensor target,
           at::Tensor buffer)
      : comm_(comm),
        work_(std::move(work)),
        target_(std::move(target)),
        buffer_(std::move(buffer)),
        started_(Clock::now()) {}

  void wait() override {
    if (waited_) return;
    waited_ = true;
    const auto t0 = Clock::now();
    CommStats& st = comm_.stats_;
    st.async_in_flight_s += std::chrono::duration<double>(t0 - started_).count();
    if (work_->isCompleted()) st.async_done_before_wait += 1;
    try {
      comm_.finish("all_reduce_async", *work_);
    } catch (...) {
      st.wait_s += elapsed_s(t0);
      throw;
    }
    if (!target_.is_same(buffer_)) target_.copy_(buffer_);
    st.wait_s += elapsed_s(t0);
  }
  bool completed() override { return waited_ || work_->isCompleted(); }

 private:
  GlooComm& comm_;
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor target_, buffer_;
  Clock::time_point started_;
  bool waited_ = false;
};

std::unique_ptr<CommWork> GlooComm::all_reduce_async(at::Tensor& t) {
  const double p = size();
  at::Tensor buffer = t.is_contiguous() ? t : t.contiguous();
  std::vector<at::Tensor> v{buffer};
  auto work = start("all_reduce_async", [&] { return pg_->allreduce(v); });
  stats_.bytes += 2 * (p - 1) / p * nbytes(t);
  stats_.calls += 1;
  stats_.async_calls += 1;
  return std::make_unique<GlooWork>(*this, std::move(work), t, std::move(buffer));
}

std::chrono::milliseconds to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
}

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
    throw CommError("rank " + std::to_string(rank) + ": cannot create a Gloo device on '" +
                    options_.hostname + "': " + cause_of(e));
  }
  std::vector<int> all(world_size);
  for (int i = 0; i < world_size; ++i) all[i] = i;
  world_comm_ = &group(all);
  static_cast<CommBase*>(world_comm_)->set_name("world" + format_ranks(all));
}

GlooCommWorld::~GlooCommWorld() {
  // Groups first (their worker threads use the device), then the device.
  groups_.clear();
  device_.reset();
}

Comm& GlooCommWorld::group(const std::vector<int>& ranks) {
  auto it = groups_.find(ranks);
  if (it != groups_.end()) return *it->second;
  const bool sorted = std::is_sorted(ranks.begin(), ranks.end()) &&
                      std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end();
  const bool in_range = !ranks.empty() && ranks.front() >= 0 && ranks.back() < world_size_;
  if (!sorted || !in_range || !std::binary_search(ranks.begin(), ranks.end(), rank_)) {
    throw std::invalid_argument("rank " + std::to_string(rank_) + ": group " + format_ranks(ranks) +
                                " must be sorted, unique, inside [0," +
                                std::to_string(world_size_) + ") and contain this rank");
  }
  std::unique_ptr<Comm> comm;
  if (ranks.size() == 1) {
    comm = std::make_unique<SelfComm>(rank_, ranks);
  } else {
    const int group_rank =
        static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank_) - ranks.begin());
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
    comm = std::make_unique<GlooComm>(rank_, ranks, std::move(pg), to_ms(options_.timeout_s));
    ++groups_created_;
  }
  Comm& ref = *comm;
  groups_.emplace(ranks, std::move(comm));
  return ref;
}

std::vector<std::vector<int>> standard_group_sets(int world_size) {
  if (world_size < 1) throw std::invalid_argument("standard_group_sets: world_size < 1");
  const int p = world_size;
  std::vector<std::vector<int>> out;
  std::set<std::vector<int>> seen;
  auto add = [&](std::vector<int> g) {
    std::sort(g.begin(), g.end());
    if (seen.insert(g).second) out.push_back(std::move(g));
  };
  for (int t = 1; t <= p; ++t) {
    if (p % t) continue;
    for (int k = 0; k < p / t; ++k) {  // TP groups: t consecutive ranks
      std::vector<int> g;
      for (int i = 0; i < t; ++i) g.push_back(k * t + i);
      add(g);
    }
    for (int j = 0; j < t; ++j) {  // DP groups: stride t
      std::vector<int> g;
      for (int m = 0; m < p / t; ++m) g.push_back(j + m * t);
      add(g);
    }
    for (int d2 = 1; d2 <= t; ++d2) {  // 2D meshes d1 x d2 inside each TP group
      if (t % d2) continue;
      const int d1 = t / d2;
      for (int k = 0; k < p / t; ++k) {
        const int base = k * t;
        for (int a = 0; a < d1; ++a) {  // axis 1: d2 consecutive ranks
          std::vector<int> g;
          for (int i = 0; i < d2; ++i) g.push_back(base + a * d2 + i);
          add(g);
        }
        for (int c = 0; c < d2; ++c) {  // axis 0: stride d2
          std::vector<int> g;
          for (int a = 0; a < d1; ++a) g.push_back(base + c + a * d2);
          add(g);
        }
      }
    }
  }
  return out;
}

void create_standard_groups(CommWorld& world) {
  for (const auto& g : standard_group_sets(world.world_size())) {
    if (std::binary_search(g.begin(), g.end(), world.rank())) world.group(g);
  }
}

}  // namespace shardgym::live
