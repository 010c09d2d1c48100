// RankDriver: how LiveRun reaches its ranks. Two implementations with one contract:
//   threads    P rank threads in this process (HashStore), commands through a mailbox;
//   processes  P rank-worker processes (TCPStore hosted here), commands and reports through
//              store keys, deaths noticed through waitpid.
// collect() returns every rank's report or throws std::runtime_error whose message starts
// with the root cause ("rank 2 failed: step (command 7): ..."); by then every rank has been
// stopped and joined (threads) or reaped (processes, killed after the timeout if needed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/live/driver/rank_protocol.h"

namespace shardgym::live {

class RankDriver {
 public:
  virtual ~RankDriver() = default;
  virtual void post(const RankCommand& cmd) = 0;
  virtual std::vector<RankReport> collect(int seq) = 0;  // in rank order
  // Stops every rank; never throws; idempotent. Returns "" when every rank left when told,
  // else what went wrong: a rank that did not leave within timeout_s (stalled between
  // commands, killed) or that exited with a failure while leaving.
  virtual std::string stop() = 0;
  virtual std::vector<int> pids() const { return {}; }   // rank processes (empty: threads)
};

std::unique_ptr<RankDriver> make_thread_driver(const LiveRankConfig& config);
// `worker`: the shardgym_rank_worker executable.
std::unique_ptr<RankDriver> make_process_driver(const LiveRankConfig& config,
                                                const std::string& worker);

}  // namespace shardgym::live
