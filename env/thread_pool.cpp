#include "env/thread_pool.h"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

namespace shardgym {

ThreadPool::ThreadPool(int threads, int refuse_thread) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) {
    try {
      if (i == refuse_thread)
        throw std::system_error(EAGAIN, std::generic_category(), "injected fault");
      workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {
      // A destroyed joinable std::thread would std::terminate: stop and join the others.
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      wake_.notify_all();
      for (std::thread& t : workers_) t.join();
      throw std::runtime_error("thread pool: cannot start worker thread " + std::to_string(i) +
                               " of " + std::to_string(threads - 1) + ": " + e.what() +
                               "; each thread counts against ulimit -u and reserves its stack "
                               "(ulimit -s) in the address space (ulimit -v)");
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_indices(std::unique_lock<std::mutex>& lock) {
  while (next_ < n_) {
    const int i = next_++;
    const std::function<void(int)>* fn = fn_;  // read under the lock
    lock.unlock();
    std::exception_ptr error;
    try {
      (*fn)(i);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) errors_[i] = error;
    if (++finished_ == n_) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    run_indices(lock);
  }
}

void ThreadPool::parallel_for(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  std::lock_guard<std::mutex> loop_lock(loop_mutex_);
  if (workers_.empty() || n == 1) {
    std::exception_ptr first;
    for (int i = 0; i < n; ++i) {
      try {
        fn(i);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  fn_ = &fn;
  n_ = n;
  next_ = 0;
  finished_ = 0;
  errors_.assign(n, nullptr);
  ++generation_;
  wake_.notify_all();
  run_indices(lock);
  // Every claimed index has finished once finished_ == n_; workers touch the shared state
  // only under the lock, so the next loop may reuse it right away.
  done_.wait(lock, [&] { return finished_ == n_; });
  fn_ = nullptr;
  std::vector<std::exception_ptr> errors;
  errors.swap(errors_);
  lock.unlock();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace shardgym
