// shardgym_rank_worker: one rank of a live run launched as a process (LiveSpec launch =
// processes). Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, meets the driver's
// TCPStore, takes its configuration from the "config" key, waits at the start gate for every
// rank process, and serves commands until stopped; progress marks go to the store
// (driver/store_channel.h).
// Exit status 0 after a stop, 1 after a failure (message on stderr).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/live/launch/process_ranks.h"
#include "runtime/live/driver/rank_protocol.h"
#include "runtime/live/driver/store_channel.h"

int main() {
  using namespace shardgym::live;
  int rank = -1;
  try {
    const ProcessEnv env = process_env_from_environment();
    rank = env.rank;
    // Tests only: "R:S" makes rank R take S more seconds to start, like a rank process that
    // loads LibTorch on a busy machine (tests/live/live_process_test.cpp).
    if (const char* d = std::getenv("SHARDGYM_TEST_RANK_START_DELAY")) {
      int r = -1;
      double s = 0;
      if (std::sscanf(d, "%d:%lf", &r, &s) == 2 && r == rank && s > 0 && s < 600) {
        std::this_thread::sleep_for(std::chrono::duration<double>(s));
      }
    }
    constexpr double kConnectTimeoutS = 60;  // the driver is up before its ranks start
    auto store = connect_store(env, /*is_server=*/false, kConnectTimeoutS);
    store_mark_progress(*store, env.rank, ProgressMark::started());
    const LiveRankConfig config = LiveRankConfig::parse(store_get_string(*store, kConfigKey));
    // Every rank process loaded and connected before the first rendezvous, whose timeout_s
    // is for peers that stop, not for peers still loading LibTorch on a busy machine. The
    // driver ends the run at once if a rank process dies before the gate.
    store_start_gate(*store, env.rank, env.world_size, kConnectTimeoutS);
    std::string all = "[0";
    for (int r = 1; r < env.world_size; ++r) all += "," + std::to_string(r);
    store_mark_progress(*store, env.rank, ProgressMark::world(all + "]"));
    StoreChannel channel(store, env.rank);
    const std::string error = run_rank_on_store(
        store, env, [&](CommWorld& w) { serve_rank(w, config, channel); }, config.timeout_s,
        parse_backend(config.backend));
    if (error.empty()) return 0;
    std::cerr << error << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << " failed: " << e.what() << std::endl;
  }
  return 1;
}
