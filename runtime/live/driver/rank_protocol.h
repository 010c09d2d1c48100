// What the driver (LiveRun) and the ranks say to each other, and the loop every rank runs.
//
// The driver owns the episode; ranks own the model. The driver posts numbered commands
// (reset / step / eval / stop) to every rank, each rank executes it SPMD with its peers and
// replies with a RankReport. Commands and reports are plain data with a text form, so the
// same loop runs in rank threads (in-process mailbox) and in rank processes (c10d store keys).
// A rank whose command throws replies ok = false with the error and then leaves the loop by
// rethrowing: its CommWorld is torn down, so peers blocked on it fail at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/live/driver/root_cause.h"
#include "runtime/live/comm/comm.h"

namespace shardgym::live {

// Everything a rank needs to build its trainer and data, identical on every rank.
struct LiveRankConfig {
  ModelSpec model;  // dtype kFloat32 or kFloat64 selects the trainer's precision
  int world_size = 1;
  double lr = 1e-3, weight_decay = 0.1, clip = 1.0;
  int threads = 1;     // intra-op threads per rank
  std::string corpus;  // text file; "" = the Debian licence texts (datasets/text)
  double timeout_s = 60;
  std::string device = "cpu";    // "cpu" | "cuda": rank on GPU local_cuda_index(its local rank)
  std::string backend = "gloo";  // "gloo" | "nccl"
  // Fault injection for the failure tests (live.extra.fault): "<kind>@<rank>:<step>" makes
  // `rank` fail at its step-th training iteration after reset (0-based): kind "throw" raises
  // an exception; "stall" stops taking part without a word (a rank process hangs until
  // killed; a rank thread, which cannot be killed, until the driver gives the run up);
  // "exit" ends the rank process abruptly (process launch only). "nostart@<rank>": that
  // rank's thread cannot be created (thread launch only). Empty: none.
  std::string fault;

  std::string serialize() const;
  static LiveRankConfig parse(const std::string& text);  // throws std::invalid_argument
};

struct FaultSpec {
  std::string kind;  // "" (none), "throw", "stall", "exit", "nostart"
  int rank = -1;
  int step = -1;  // -1 for nostart
};
// Throws std::invalid_argument naming the accepted form.
FaultSpec parse_fault(const std::string& text);

// kStop: leave the loop (then the launcher's closing barrier); kAbort: a peer failed, leave by
// failing, so that no rank waits in a closing barrier for peers that are gone.
// kCollectives: time every collective on every standard group (calibration's microbenchmarks).
enum class RankOp { kReset, kStep, kEval, kStop, kAbort, kCollectives };
// What kCollectives times on each group, in this order (the rank's report and the driver's
// reading of it both walk it).
inline constexpr const char* kTimedCollectives[] = {"all_reduce", "all_gather", "reduce_scatter"};
// Then the first stage boundary of each pipeline the world can form (stage sizes S that
// divide it into two or more stages, smallest first): ranks [0, S) and [S, 2S) exchange
// `bytes` with their counterpart, a send and a receive posted together as a 1F1B step's
// send_forward_recv_backward does (tp/pipeline.cpp).
inline std::vector<int> timed_stage_sizes(int world) {
  std::vector<int> out;
  for (int s = 1; 2 * s <= world; ++s)
    if (world % s == 0) out.push_back(s);
  return out;
}
const char* op_name(RankOp op);  // "reset", "step", ... for messages and the wire format

struct RankCommand {
  int seq = 0;  // 1, 2, ... in posting order
  RankOp op = RankOp::kStop;
  std::string plan;    // kReset, kStep: Plan text
  uint64_t seed = 0;   // kReset: weights and data
  int eval_index = 0;  // kEval: which validation batch
  // kStep: the iteration's batch runs as this many micro-batches with gradient accumulation
  // (tp/micro_batches.h); the driver has checked that it divides every local batch.
  int micro_batches = 1;
  // kStep: each rank's compute stretch (RankTrainer::set_compute_stretch), indexed by rank;
  // empty = none. A scenario's straggler events on live ranks (LiveRun::iterate).
  std::vector<double> slowdown;
  int64_t bytes = 0;  // kCollectives: per rank
  int reps = 0;       // kCollectives: timed calls of each (after one warm-up)

  std::string serialize() const;
  static RankCommand parse(const std::string& text);
};

struct RankReport {
  int seq = 0;
  int rank = 0;
  bool ok = true;
  std::string error;
  double loss = 0;
  double step_s = 0;  // wall clock of the training iteration
  double repartition_s = 0;
  double repartition_bytes = 0;  // received by this rank
  // Largest memory the rank held during the repartition above what it held before it
  // (allocator figures; tp/repartition.cpp says what makes it up).
  double repartition_peak_bytes = 0;
  int blocks_changed = 0;
  double busy_s = 0;      // thread CPU time of the command
  double peak_bytes = 0;  // allocator peak during the command
  std::vector<double> fwd_s, bwd_s, comm_s;
  double optimizer_s = 0;  // the step's optimizer step (BlockTimes::optimizer_s)

  std::string serialize() const;
  static RankReport parse(const std::string& text);
};

// The rank's end of the conversation.
class RankChannel {
 public:
  virtual ~RankChannel() = default;
  // Next command after `last_seq`; blocks until one is posted.
  virtual RankCommand next(int last_seq) = 0;
  virtual void reply(const RankReport& report) = 0;
  // True once the driver has posted a command after `seq` (an abort or stop while this rank
  // is still inside `seq`): how a stalled rank thread learns it may leave. Default: never.
  virtual bool abandoned(int /*seq*/) { return false; }
  // How far this rank got, recorded before each blocking step (driver/root_cause.h) where
  // the driver can read it after a failure. Default: not recorded (threads).
  virtual void progress(const ProgressMark& /*mark*/) {}
};

// Runs commands until kStop. Throws (after replying ok = false) when a command fails. The
// rank's memory counts in MemoryMeter slot `meter_base` + rank (driver/meters.h).
void serve_rank(CommWorld& world, const LiveRankConfig& config, RankChannel& channel,
                int meter_base = 0);

}  // namespace shardgym::live
