// Launching ranks as processes that meet through c10d's TCPStore, with the torchrun-style
// variables RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (also how ranks on
// several machines find each other). Same failure contract as launch/thread_ranks.h: a rank that fails
// reports "rank R failed: ..." and exits non-zero; a rank that dies closes its sockets, so
// its peers fail at once; a stalled rank makes its peers time out; the launcher reaps (and
// after the timeout kills) every child, so no process outlives it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "runtime/live/comm/comm.h"
#include "runtime/live/comm/world.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace shardgym::live {

// The torchrun-style variables of one rank.
struct ProcessEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; throws std::invalid_argument
// naming the variable that is missing or malformed.
ProcessEnv process_env_from_environment();

// In a rank process: meets the others through a TCPStore (rank 0 hosts it unless
// SHARDGYM_STORE_HOSTED=1 says the launcher does) and runs fn(world) with the same failure
// contract as run_threads; returns 0 on success, otherwise prints "rank R failed: ..." to
// stderr and returns 1.
int run_this_process(const ProcessEnv& env, const std::function<void(CommWorld&)>& fn,
                     double timeout_s);

// The same over a store the caller already holds (the groups live under the "gloo/" or
// "nccl/" prefix of it; NCCL: this rank on GPU LOCAL_RANK). Returns an empty string on
// success, else the failure message.
std::string run_rank_on_store(const c10::intrusive_ptr<c10d::Store>& store, const ProcessEnv& env,
                              const std::function<void(CommWorld&)>& fn, double timeout_s,
                              CommBackend backend = CommBackend::kGloo);
// A TCPStore client (or server, `is_server`) for MASTER_ADDR:MASTER_PORT.
c10::intrusive_ptr<c10d::Store> connect_store(const ProcessEnv& env, bool is_server,
                                              double timeout_s);

struct ProcessResult {
  int rank = 0;
  int exit_code = 0;   // -signal when killed by a signal
  std::string output;  // stdout+stderr of the rank
  double exit_s = 0;   // when it exited, seconds after the launch
};

// A loopback TCP port that was free a moment ago.
int free_loopback_port();

// `world_size` copies of `argv` (argv[0] = executable path), rank r with RANK=r, LOCAL_RANK=r,
// WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=port and `extra_env`. Children die with
// the launcher (PR_SET_PDEATHSIG); the destructor kills and reaps any still running.
class RankProcesses {
 public:
  RankProcesses(int world_size, const std::vector<std::string>& argv, int port,
                const std::vector<std::pair<std::string, std::string>>& extra_env = {});
  ~RankProcesses();
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // Reads output and reaps exited children, waiting up to `wait_s` for something to happen.
  void poll(double wait_s);
  int running() const;
  bool exited(int rank) const;
  std::vector<int> pids() const;
  void kill_all();  // SIGKILL to every child still running, then reaps them
  const ProcessResult& result(int rank) const;

 private:
  struct Child;
  std::vector<Child> children_;
};

// Starts `world_size` copies of `argv` (argv[0] = executable path) with the variables above on
// loopback, a free port picked by the launcher, which hosts the TCPStore. Waits for all; when a
// rank exits with a failure, the others get `timeout_s` to stop on their own and are then killed.
// Returns every rank's result (also on failure; the caller decides).
std::vector<ProcessResult> run_processes(int world_size, const std::vector<std::string>& argv,
                                         double timeout_s);
}  // namespace shardgym::live
