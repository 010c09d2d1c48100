// The rank/driver conversation over c10d store keys, for ranks that are processes:
//   "config"             LiveRankConfig text, set by the driver before the ranks start
//   "cmd/<seq>"          RankCommand text, set by the driver
//   "rep/<seq>/<rank>"   RankReport text, set by the rank
//   "fail/<n>"           the n-th failing RankReport (n from "fail_count"), in failure order,
//                        so the driver can tell the root cause from the failures it caused
//   "prog/<rank>"        the rank's latest ProgressMark (driver/root_cause.h), set before each
//                        blocking step, its ticket from the counter "prog_clock"
//   "started"            how many rank processes reached the store: the start gate
#pragma once

#include <string>

#include <c10/util/intrusive_ptr.h>

#include "runtime/live/driver/rank_protocol.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace shardgym::live {

std::string command_key(int seq);
std::string report_key(int seq, int rank);
std::string failure_key(int n);
constexpr const char* kConfigKey = "config";
constexpr const char* kFailCountKey = "fail_count";
constexpr const char* kStartedKey = "started";
std::string progress_key(int rank);

// Records `mark` as rank's latest progress, with the next ticket.
void store_mark_progress(c10d::Store& store, int rank, ProgressMark mark);
// The start gate of a rank process: counts this rank in and waits until all `world_size`
// have reached the store, so that loading LibTorch (seconds on a loaded machine) is not
// charged to the first rendezvous's timeout_s. Throws std::runtime_error naming how many
// arrived if they do not within `limit_s`.
void store_start_gate(c10d::Store& store, int rank, int world_size, double limit_s);

std::string store_get_string(c10d::Store& store, const std::string& key);
void store_set_string(c10d::Store& store, const std::string& key, const std::string& value);

class StoreChannel : public RankChannel {
 public:
  StoreChannel(c10::intrusive_ptr<c10d::Store> store, int rank);
  // Polls for "cmd/<last+1>"; a lost store connection (driver gone) throws. Marks progress
  // "waiting for command last+1", then "in <op> (command last+1)".
  RankCommand next(int last_seq) override;
  void reply(const RankReport& report) override;
  void progress(const ProgressMark& mark) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
};

}  // namespace shardgym::live
