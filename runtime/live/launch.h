// Launching P ranks as threads of this process (c10d HashStore); launch_process.h does the
// same with processes meeting through c10d's TCPStore.
//
// Contract on failure: a rank that throws records the failure (rank, message, time) and then
// tears down its CommWorld, which closes its sockets, so peers blocked on it fail at once with
// a CommError; a rank that stalls makes its peers' collectives time out after `timeout_s`.
// Either way every rank returns, every thread is joined (every child process reaped) and the
// launcher throws RankError whose message starts with the earliest failure — the root cause —
// e.g. "rank 2 failed: ...". Nothing is left running.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/live/comm.h"
#include "runtime/live/comm_world.h"

namespace shardgym::live {

struct RankFailure {
  int rank = -1;
  std::string what;  // the rank's error message (a CommError names the operation and group)
  double at_s = 0;   // seconds since the launch started
  bool aborted = false;  // the rank left by RankAborted: a consequence, never the root cause
};

// Thrown by a rank's function to leave because its driver gave up the run after another rank
// failed: the rank fails (so the launcher skips the closing barrier with peers that are gone)
// but is listed after every real failure, whatever the timing.
class RankAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RankError : public std::runtime_error {
 public:
  // `failures` sorted by time, aborted ranks last: the first is the root cause.
  explicit RankError(std::vector<RankFailure> failures);
  const std::vector<RankFailure>& failures() const { return failures_; }
  int first_rank() const { return failures_.front().rank; }

 private:
  std::vector<RankFailure> failures_;
};

// Runs fn(world) on `world_size` threads, one rank each, over Gloo (or NCCL: rank r on GPU r)
// with a shared HashStore. `timeout_s` bounds every rendezvous and collective. Returns when
// all ranks returned; throws RankError if any rank failed.
void run_threads(int world_size, const std::function<void(CommWorld&)>& fn, double timeout_s,
                 CommBackend backend = CommBackend::kGloo);
// The same with every option of the ranks' worlds (timeout_s from `options`; local_rank is
// set per rank: the rank).
void run_threads(int world_size, const std::function<void(CommWorld&)>& fn,
                 const WorldOptions& options);

// The same, started in the background: the constructor returns once the threads run; join()
// (also called by the destructor, which swallows the error) waits for all of them.
class ThreadRanks {
 public:
  ThreadRanks(int world_size, std::function<void(CommWorld&)> fn, double timeout_s,
              CommBackend backend = CommBackend::kGloo);
  ThreadRanks(int world_size, std::function<void(CommWorld&)> fn, const WorldOptions& options);
  ~ThreadRanks();
  ThreadRanks(const ThreadRanks&) = delete;
  ThreadRanks& operator=(const ThreadRanks&) = delete;

  void join();              // throws RankError if any rank failed (once)
  bool any_failed() const;  // a rank has failed already (others may still run)
  bool all_done() const;    // every rank returned
  // Blocks until all ranks returned or `timeout_s` passed; true if all returned.
  bool wait_done(double timeout_s) const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;
  bool joined_ = false;
};

}  // namespace shardgym::live
