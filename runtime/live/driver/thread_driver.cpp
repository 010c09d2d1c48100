// The thread driver: ranks as threads, commands through an in-process mailbox.
#include "runtime/live/driver/rank_driver.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "runtime/live/driver/meters.h"
#include "runtime/live/launch/thread_ranks.h"

namespace shardgym::live {
namespace {

struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  RankCommand cmd;  // the latest command (seq 0: none yet)
  std::vector<RankReport> reports;
  std::vector<bool> have;
  std::vector<int> answered;  // per rank: the last command it replied to, accepted or late
  bool failed_report = false;
};

class MailboxChannel : public RankChannel {
 public:
  explicit MailboxChannel(std::shared_ptr<Mailbox> box) : box_(std::move(box)) {}
  RankCommand next(int last_seq) override {
    std::unique_lock<std::mutex> lock(box_->mu);
    box_->cv.wait(lock, [&] { return box_->cmd.seq > last_seq; });
    return box_->cmd;
  }
  void reply(const RankReport& r) override {
    std::lock_guard<std::mutex> lock(box_->mu);
    if (r.rank < 0 || r.rank >= static_cast<int>(box_->have.size())) return;
    box_->answered[r.rank] = std::max(box_->answered[r.rank], r.seq);
    if (r.seq != box_->cmd.seq) return;  // a late reply to a command the driver gave up on
    box_->reports[r.rank] = r;
    box_->have[r.rank] = true;
    box_->failed_report = box_->failed_report || !r.ok;
    box_->cv.notify_all();
  }
  bool abandoned(int seq) override {
    std::lock_guard<std::mutex> lock(box_->mu);
    return box_->cmd.seq > seq;
  }

 private:
  std::shared_ptr<Mailbox> box_;
};

class ThreadDriver : public RankDriver {
 public:
  explicit ThreadDriver(const LiveRankConfig& config)
      : box_(std::make_shared<Mailbox>()),
        world_(config.world_size),
        timeout_s_(config.timeout_s),
        meter_(config.world_size) {
    box_->reports.resize(world_);
    box_->have.assign(world_, false);
    box_->answered.assign(world_, 0);
    auto box = box_;
    const FaultSpec fault = parse_fault(config.fault);
    const int meter_base = meter_.base();
    ranks_ = std::make_unique<ThreadRanks>(
        world_,
        [box, config, meter_base](CommWorld& w) {
          MailboxChannel channel(box);
          serve_rank(w, config, channel, meter_base);
        },
        world_options(config), fault.kind == "nostart" ? fault.rank : -1);
  }
  ~ThreadDriver() override { stop(); }

  void post(const RankCommand& cmd) override {
    std::lock_guard<std::mutex> lock(box_->mu);
    box_->cmd = cmd;
    box_->have.assign(world_, false);
    box_->cv.notify_all();
  }

  std::vector<RankReport> collect(int seq) override {
    {
      std::unique_lock<std::mutex> lock(box_->mu);
      for (;;) {
        if (box_->cmd.seq != seq) throw std::logic_error("collect: command not posted");
        int n = 0;
        for (bool h : box_->have) n += h;
        if (n == world_ && !box_->failed_report) return box_->reports;
        if (box_->failed_report || ranks_->any_failed() || ranks_->all_done()) break;
        box_->cv.wait_for(lock, std::chrono::milliseconds(20));
      }
    }
    std::string error = "ranks stopped without reporting";
    RankOp op;
    {
      std::lock_guard<std::mutex> lock(box_->mu);
      op = box_->cmd.op;
      for (const auto& r : box_->reports) {
        if (!r.ok && r.seq == seq) {
          error = "rank " + std::to_string(r.rank) + " failed: " + r.error;
          break;
        }
      }
    }
    std::vector<RankFailure> failures;
    try {
      shutdown(RankOp::kAbort);
    } catch (const RankError& e) {
      error = e.what();  // root cause first, across all ranks
      failures = e.failures();
    }
    // A rank that never answered `seq` and left only when aborted stopped taking part: its
    // peers' timeouts are its doing, so it is the root cause. (A rank that fails replies
    // first; one that finishes replies, late or not.)
    std::string stalled;
    {
      std::lock_guard<std::mutex> lock(box_->mu);
      for (int r = 0; r < world_; ++r) {
        if (box_->answered[r] >= seq) continue;
        const auto f = std::find_if(failures.begin(), failures.end(),
                                    [&](const RankFailure& x) { return x.rank == r; });
        if (f != failures.end() && !f->aborted) continue;  // failed outside a command
        stalled += (stalled.empty() ? "rank " : ", rank ") + std::to_string(r);
      }
    }
    if (!stalled.empty()) {
      std::ostringstream m;
      m << stalled << " stalled: no answer to " << op_name(op) << " (command " << seq
        << ") while its peers waited up to timeout_s = " << timeout_s_
        << " s; stopped by the driver (then: " << error << ")";
      error = m.str();
    }
    throw std::runtime_error(error);
  }

  std::string stop() override {
    if (!ranks_) return "";  // never started, or collect() has stopped (and reported) them
    try {
      shutdown();
    } catch (const RankError& e) {
      return std::string("a rank failed while stopping: ") + e.what();
    }
    return "";
  }

 private:
  void shutdown(RankOp op = RankOp::kStop) {
    if (!ranks_) return;
    RankCommand stop_cmd;
    stop_cmd.op = op;
    {
      std::lock_guard<std::mutex> lock(box_->mu);
      stop_cmd.seq = box_->cmd.seq + 1;
    }
    post(stop_cmd);
    auto ranks = std::move(ranks_);
    ranks->join();
  }

  static WorldOptions world_options(const LiveRankConfig& config) {
    WorldOptions o;
    o.backend = parse_backend(config.backend);
    o.timeout_s = config.timeout_s;
    return o;
  }

  std::shared_ptr<Mailbox> box_;
  int world_;
  double timeout_s_;
  // This run's memory meter slots: released after ranks_ (declared later) has ended the rank
  // threads, whose trainers free their tensors into these slots as they leave.
  MemoryMeter::Lease meter_;
  std::unique_ptr<ThreadRanks> ranks_;
};

}  // namespace

std::unique_ptr<RankDriver> make_thread_driver(const LiveRankConfig& config) {
  return std::make_unique<ThreadDriver>(config);
}

}  // namespace shardgym::live
