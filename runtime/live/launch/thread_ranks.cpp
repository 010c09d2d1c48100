#include "runtime/live/launch/thread_ranks.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "runtime/live/comm/world.h"
#include "runtime/live/launch/process_ranks.h"

namespace shardgym::live {
namespace {

using Clock = std::chrono::steady_clock;

// A rank that fails closes its sockets; a peer still sending to it gets SIGPIPE, whose default
// action kills the whole process with no word (seen: `shardgym train` exit 141 in 1 of 24
// runs with a throwing rank). Ignored, the send fails with EPIPE and Gloo's error reaches the
// rank like any other, so every process that runs ranks ignores it.
void ignore_sigpipe() {
  static const bool once = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)once;
}

std::string message_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

std::string format_failures(const std::vector<RankFailure>& f) {
  if (f.empty()) return "RankError without failures";
  std::ostringstream m;
  m << "rank " << f[0].rank << " failed: " << f[0].what;
  if (f.size() > 1) {
    m << " (then " << f.size() - 1 << " other rank(s) stopped:";
    for (size_t i = 1; i < f.size(); ++i) m << " [rank " << f[i].rank << ": " << f[i].what << "]";
    m << ")";
  }
  return m.str();
}

// Runs one rank: connect, fn, a closing barrier so no rank closes sockets a peer still
// reads from, then teardown. Returns the failure, if any (never throws).
template <typename Connect>
bool run_rank(int rank, Connect&& connect, const std::function<void(CommWorld&)>& fn,
              Clock::time_point t0, RankFailure* failure) {
  std::unique_ptr<CommWorld> world;
  bool ok = true;
  try {
    world = connect();
    fn(*world);
  } catch (const RankAborted& e) {
    ok = false;
    *failure = {rank, e.what(), std::chrono::duration<double>(Clock::now() - t0).count(), true};
  } catch (const std::exception& e) {
    ok = false;
    *failure = {rank, message_of(e), std::chrono::duration<double>(Clock::now() - t0).count()};
  } catch (...) {
    ok = false;
    *failure = {rank, "unknown exception",
                std::chrono::duration<double>(Clock::now() - t0).count()};
  }
  if (ok) {
    try {
      world->world().barrier();
    } catch (const std::exception&) {
      // A peer failed after this rank finished; that peer reports its own failure.
    }
  }
  world.reset();  // closes this rank's sockets: peers blocked on it fail now
  return ok;
}

}  // namespace

RankError::RankError(std::vector<RankFailure> failures)
    : std::runtime_error(format_failures(failures)), failures_(std::move(failures)) {
  if (failures_.empty()) failures_.push_back({-1, "RankError without failures", 0});
}

struct ThreadRanks::Shared {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<RankFailure> failures;
  int done = 0;
  int world = 0;
  // The start gate: rank threads wait here until every one of them exists (started), or
  // leave at once when one could not be created (cancelled).
  bool started = false;
  bool cancelled = false;
};

namespace {
WorldOptions world_options(double timeout_s, CommBackend backend) {
  WorldOptions o;
  o.backend = backend;
  o.timeout_s = timeout_s;
  return o;
}
}  // namespace

ThreadRanks::ThreadRanks(int world_size, std::function<void(CommWorld&)> fn, double timeout_s,
                         CommBackend backend)
    : ThreadRanks(world_size, std::move(fn), world_options(timeout_s, backend)) {}

ThreadRanks::ThreadRanks(int world_size, std::function<void(CommWorld&)> fn,
                         const WorldOptions& options, int refuse_start_rank)
    : shared_(std::make_shared<Shared>()) {
  if (world_size < 1) throw std::invalid_argument("run_threads: world_size must be >= 1");
  if (!(options.timeout_s > 0))
    throw std::invalid_argument("run_threads: timeout_s must be positive");
  shared_->world = world_size;
  ignore_sigpipe();
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto t0 = Clock::now();
  auto body = std::make_shared<std::function<void(CommWorld&)>>(std::move(fn));
  threads_.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    try {
      if (r == refuse_start_rank) {
        throw std::system_error(EAGAIN, std::generic_category(), "injected fault (nostart)");
      }
      threads_.emplace_back([shared = shared_, store, options, t0, body, r, world_size] {
        {
          std::unique_lock<std::mutex> lock(shared->mu);
          shared->cv.wait(lock, [&] { return shared->started || shared->cancelled; });
          if (shared->cancelled) return;
        }
        RankFailure f;
        auto connect = [&] {
          WorldOptions o = options;
          o.local_rank = r;  // one process: rank r on GPU r
          return make_comm_world(store, r, world_size, o);
        };
        const bool ok = run_rank(r, connect, *body, t0, &f);
        std::lock_guard<std::mutex> lock(shared->mu);
        if (!ok) shared->failures.push_back(std::move(f));
        ++shared->done;
        shared->cv.notify_all();
      });
    } catch (const std::exception& e) {
      // No rank has touched the store yet: the ones started leave at the gate.
      {
        std::lock_guard<std::mutex> lock(shared_->mu);
        shared_->cancelled = true;
      }
      shared_->cv.notify_all();
      for (auto& t : threads_) t.join();
      joined_ = true;
      const std::string cause = e.what();  // std::system_error: "Resource temporarily ..."
      throw RankError({{r,
                        "cannot start rank thread " + std::to_string(r) + " of " +
                            std::to_string(world_size) + ": " + cause +
                            "; each thread counts against ulimit -u and reserves its stack "
                            "(ulimit -s) in the address space (ulimit -v)",
                        std::chrono::duration<double>(Clock::now() - t0).count()}});
    }
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->started = true;
  }
  shared_->cv.notify_all();
}

ThreadRanks::~ThreadRanks() {
  try {
    join();
  } catch (const RankError&) {
    // The owner did not ask; the threads are joined either way.
  }
}

void ThreadRanks::join() {
  if (joined_) return;
  for (auto& t : threads_) t.join();
  joined_ = true;
  std::vector<RankFailure> failures;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    failures = shared_->failures;
  }
  if (!failures.empty()) {
    std::stable_sort(failures.begin(), failures.end(),
                     [](const RankFailure& a, const RankFailure& b) {
                       if (a.aborted != b.aborted) return b.aborted;
                       return a.at_s < b.at_s;
                     });
    throw RankError(std::move(failures));
  }
}

bool ThreadRanks::any_failed() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return !shared_->failures.empty();
}

bool ThreadRanks::all_done() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->done == shared_->world;
}

bool ThreadRanks::wait_done(double timeout_s) const {
  std::unique_lock<std::mutex> lock(shared_->mu);
  return shared_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                              [&] { return shared_->done == shared_->world; });
}

void run_threads(int world_size, const std::function<void(CommWorld&)>& fn, double timeout_s,
                 CommBackend backend) {
  run_threads(world_size, fn, world_options(timeout_s, backend));
}

void run_threads(int world_size, const std::function<void(CommWorld&)>& fn,
                 const WorldOptions& options) {
  ThreadRanks ranks(world_size, fn, options);
  ranks.join();
}

namespace {

int env_int(const char* name, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw std::invalid_argument(std::string("environment variable ") + name + " is not set");
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > 1 << 20) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + v +
                                "' is not an integer >= " + std::to_string(lo));
  }
  return static_cast<int>(x);
}

}  // namespace

ProcessEnv process_env_from_environment() {
  ProcessEnv e;
  e.rank = env_int("RANK", 0);
  e.world_size = env_int("WORLD_SIZE", 1);
  e.local_rank = std::getenv("LOCAL_RANK") ? env_int("LOCAL_RANK", 0) : e.rank;
  const char* addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr) throw std::invalid_argument("environment variable MASTER_ADDR is not set");
  e.master_addr = addr;
  e.master_port = env_int("MASTER_PORT", 1);
  if (e.master_port > 65535) throw std::invalid_argument("MASTER_PORT must be <= 65535");
  if (e.rank >= e.world_size) {
    throw std::invalid_argument("RANK=" + std::to_string(e.rank) +
                                " is not below WORLD_SIZE=" + std::to_string(e.world_size));
  }
  return e;
}

c10::intrusive_ptr<c10d::Store> connect_store(const ProcessEnv& env, bool is_server,
                                              double timeout_s) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env.master_port);
  so.isServer = is_server;
  so.waitWorkers = false;
  so.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  try {
    return c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(env.rank) + ": cannot " +
                    (is_server ? "host" : "reach") + " the store at " + env.master_addr + ":" +
                    std::to_string(env.master_port) + ": " + message_of(e));
  }
}

std::string run_rank_on_store(const c10::intrusive_ptr<c10d::Store>& store, const ProcessEnv& env,
                              const std::function<void(CommWorld&)>& fn, double timeout_s,
                              CommBackend backend) {
  ignore_sigpipe();
  const auto t0 = Clock::now();
  WorldOptions options;
  options.backend = backend;
  options.timeout_s = timeout_s;
  options.local_rank = env.local_rank;
  // On loopback the Gloo device binds to 127.0.0.1; across machines to this host's address.
  const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
  options.hostname = loopback ? "127.0.0.1" : "";
  auto connect = [&] {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(backend_name(backend), store);
    return make_comm_world(prefixed, env.rank, env.world_size, options);
  };
  RankFailure f;
  if (run_rank(env.rank, connect, fn, t0, &f)) return "";
  return "rank " + std::to_string(f.rank) + " failed: " + f.what;
}

int run_this_process(const ProcessEnv& env, const std::function<void(CommWorld&)>& fn,
                     double timeout_s) {
  std::string error;
  try {
    const char* hosted = std::getenv("SHARDGYM_STORE_HOSTED");
    const bool server = env.rank == 0 && !(hosted && std::string(hosted) == "1");
    // The store outlives the world: rank 0 may host it while peers still read from it.
    auto store = connect_store(env, server, timeout_s);
    error = run_rank_on_store(store, env, fn, timeout_s);
  } catch (const std::exception& e) {
    error = "rank " + std::to_string(env.rank) + " failed: " + message_of(e);
  }
  if (error.empty()) return 0;
  std::cerr << error << std::endl;
  return 1;
}

}  // namespace shardgym::live
