// The thread driver: ranks as threads, commands through an in-process mailbox.
#include "runtime/live/live_run_driver.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "runtime/live/launch.h"

namespace shardgym::live {
namespace {

struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  RankCommand cmd;  // the latest command (seq 0: none yet)
  std::vector<RankReport> reports;
  std::vector<bool> have;
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
    if (r.seq != box_->cmd.seq || r.rank < 0 || r.rank >= static_cast<int>(box_->have.size())) {
      return;  // a late reply to a command the driver gave up on
    }
    box_->reports[r.rank] = r;
    box_->have[r.rank] = true;
    box_->failed_report = box_->failed_report || !r.ok;
    box_->cv.notify_all();
  }

 private:
  std::shared_ptr<Mailbox> box_;
};

class ThreadDriver : public RankDriver {
 public:
  explicit ThreadDriver(const LiveRankConfig& config)
      : box_(std::make_shared<Mailbox>()), world_(config.world_size) {
    box_->reports.resize(world_);
    box_->have.assign(world_, false);
    auto box = box_;
    ranks_ = std::make_unique<ThreadRanks>(
        world_,
        [box, config](CommWorld& w) {
          MailboxChannel channel(box);
          serve_rank(w, config, channel);
        },
        config.timeout_s, parse_backend(config.backend));
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
    {
      std::lock_guard<std::mutex> lock(box_->mu);
      for (const auto& r : box_->reports) {
        if (!r.ok && r.seq == seq) {
          error = "rank " + std::to_string(r.rank) + " failed: " + r.error;
          break;
        }
      }
    }
    try {
      shutdown(RankOp::kAbort);
    } catch (const RankError& e) {
      error = e.what();  // root cause first, across all ranks
    }
    throw std::runtime_error(error);
  }

  void stop() override {
    try {
      shutdown();
    } catch (const RankError&) {
      // Already reported by collect(), or a rank failed while stopping: nothing to add.
    }
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

  std::shared_ptr<Mailbox> box_;
  int world_;
  std::unique_ptr<ThreadRanks> ranks_;
};

}  // namespace

std::unique_ptr<RankDriver> make_thread_driver(const LiveRankConfig& config) {
  return std::make_unique<ThreadDriver>(config);
}

}  // namespace shardgym::live
