// ThreadPool: a fixed set of workers for fork-join loops (VectorEnv steps N envs at once).
//
//   ThreadPool pool(4);
//   pool.parallel_for(n, [&](int i) { results[i] = envs[i]->step(actions[i]); });
//
// parallel_for blocks until every index has run; the calling thread works too, so a pool of
// size 1 runs everything inline with no thread at all. If tasks throw, every index still
// runs and the exception of the lowest index is rethrown to the caller. One loop at a time:
// concurrent parallel_for calls on the same pool are serialised.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardgym {

class ThreadPool {
 public:
  // threads ≤ 0 picks std::thread::hardware_concurrency() (at least 1). When a worker cannot
  // be created (ulimit -u, the address space for its stack), the workers already started are
  // stopped and joined and std::runtime_error names the thread and the cause, at once
  // (docs/robustness.md; as rank threads do, runtime/live/launch/thread_ranks.cpp).
  // `refuse_thread` (tests only): worker k fails to start as if the system refused it.
  explicit ThreadPool(int threads, int refuse_thread = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int n, const std::function<void(int)>& fn);

 private:
  void worker_loop();
  // Claims indices of the current loop until none is left; `lock` holds mutex_ on entry/exit.
  void run_indices(std::unique_lock<std::mutex>& lock);

  std::vector<std::thread> workers_;
  std::mutex loop_mutex_;  // serialises parallel_for callers
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;  // bumped per loop; workers wait for a new one
  bool stop_ = false;
  const std::function<void(int)>* fn_ = nullptr;
  int n_ = 0, next_ = 0, finished_ = 0;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace shardgym
