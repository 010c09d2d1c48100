// Launching P ranks as threads of this process (c10d HashStore); launch/process_ranks.h does the
// same with processes meeting through c10d's TCPStore.
//
// Contract on failure — every run ends, with its root cause named, and nothing left running:
//  - a rank that throws records the failure (rank, message, time) and tears down its
//    CommWorld, which closes its sockets, so peers blocked on it fail at once with a CommError;
//  - a rank that stalls (stops taking part) makes its peers' collectives time out after
//    `timeout_s`; the driver (driver/rank_driver.h) then aborts the run and names the rank that
//    never answered the command as the root cause ("rank 1 stalled: ..."). A stalled rank
//    process is killed kStopGraceS after the abort; a rank thread cannot be killed, so it must
//    leave when it sees the abort (RankChannel::abandoned; the injected stall does). The run
//    ends within timeout_s + kEndGraceS (2 s) of the stall: kStopGraceS for ranks to leave,
//    1 s to join threads or kill and reap processes (measured by scripts/reproduce/live_faults.sh,
//    docs/robustness.md);
//  - a rank thread that cannot be created (std::system_error from std::thread: ulimit -u,
//    ulimit -v) releases the threads already started, which wait at a start gate before any
//    rendezvous, joins them and throws RankError "rank 37 failed: cannot start rank thread 37
//    of 64: Resource temporarily unavailable ..." from the constructor;
//  - worlds this host cannot hold (file descriptors, threads, cores, memory) are refused before
//    any rank starts (launch/world_limits.h).
// A process that runs ranks ignores SIGPIPE: a send to a peer that closed its sockets must fail
// as an error the rank reports, not kill the process.
// Either way every rank returns, every thread is joined (every child process reaped) and the
// launcher throws RankError whose message starts with the earliest failure — the root cause —
// e.g. "rank 2 failed: ...".
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/live/comm/comm.h"
#include "runtime/live/comm/world.h"

namespace shardgym::live {

// How long a driver waits for ranks to leave after it aborted a run, before it kills them
// (processes) or reports them (threads): healthy ranks see the abort within milliseconds.
constexpr double kStopGraceS = 1.0;
// The contract's grace: a failed run ends within timeout_s + kEndGraceS of the failure.
constexpr double kEndGraceS = kStopGraceS + 1.0;

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

// The same, started in the background: the constructor returns once every thread runs (none
// starts its rendezvous before all exist); join() (also called by the destructor, which
// swallows the error) waits for all of them. `refuse_start_rank` (fault injection, live.extra
// fault "nostart@R"): creating that rank's thread fails as the system would, with EAGAIN.
class ThreadRanks {
 public:
  ThreadRanks(int world_size, std::function<void(CommWorld&)> fn, double timeout_s,
              CommBackend backend = CommBackend::kGloo);
  ThreadRanks(int world_size, std::function<void(CommWorld&)> fn, const WorldOptions& options,
              int refuse_start_rank = -1);
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
