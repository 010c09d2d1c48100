// The process driver: ranks as shardgym_rank_worker processes, this process hosts the
// TCPStore they meet through and talks to them over its keys (driver/store_channel.h).
#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/launch/process_ranks.h"
#include "runtime/live/driver/rank_driver.h"
#include "runtime/live/driver/root_cause.h"
#include "runtime/live/driver/store_channel.h"

namespace shardgym::live {
namespace {

using Clock = std::chrono::steady_clock;

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

class ProcessDriver : public RankDriver {
 public:
  ProcessDriver(const LiveRankConfig& config, const std::string& worker)
      : world_(config.world_size), timeout_s_(config.timeout_s) {
    ProcessEnv env;
    env.master_addr = "127.0.0.1";
    env.master_port = free_loopback_port();
    store_ = connect_store(env, /*is_server=*/true, timeout_s_);
    store_set_string(*store_, kConfigKey, config.serialize());
    procs_ = std::make_unique<RankProcesses>(
        world_, std::vector<std::string>{worker}, env.master_port,
        std::vector<std::pair<std::string, std::string>>{{"SHARDGYM_STORE_HOSTED", "1"}});
  }
  ~ProcessDriver() override { stop(); }

  void post(const RankCommand& cmd) override {
    last_ = cmd;
    store_set_string(*store_, command_key(cmd.seq), cmd.serialize());
  }

  std::vector<RankReport> collect(int seq) override {
    std::vector<std::optional<RankReport>> got(world_);
    for (;;) {
      int have = 0;
      bool failed = false;
      for (int r = 0; r < world_; ++r) {
        if (!got[r] && store_->check({report_key(seq, r)})) {
          got[r] = RankReport::parse(store_get_string(*store_, report_key(seq, r)));
        }
        have += got[r].has_value();
        failed = failed || (got[r] && !got[r]->ok);
      }
      if (have == world_ && !failed) break;
      procs_->poll(0.001);
      if (failed || procs_->running() < world_) throw std::runtime_error(fail(seq));
    }
    std::vector<RankReport> out;
    for (int r = 0; r < world_; ++r) {
      out.push_back(*got[r]);
      store_->deleteKey(report_key(seq, r));
    }
    store_->deleteKey(command_key(seq));
    return out;
  }

  std::vector<int> pids() const override { return procs_ ? procs_->pids() : std::vector<int>{}; }

  std::string stop() override {
    if (!procs_) return "";
    std::vector<int> stuck;
    std::string why;
    try {
      stuck = shutdown();
    } catch (const std::exception& e) {
      // The store may already be gone with a dead rank; the children are killed below.
      why = std::string("stopping the ranks failed: ") + e.what();
    }
    procs_->kill_all();
    if (!stuck.empty()) {
      std::ostringstream m;
      for (size_t i = 0; i < stuck.size(); ++i) m << (i ? ", rank " : "rank ") << stuck[i];
      m << " stalled: no answer to stop (command " << last_.seq << ") within timeout_s = "
        << timeout_s_ << " s after the last command; killed";
      why = m.str();
    } else if (why.empty()) {
      for (int r = 0; r < world_; ++r) {
        const ProcessResult& res = procs_->result(r);
        if (res.exit_code == 0) continue;
        why = "rank " + std::to_string(r) + " exited with status " +
              std::to_string(res.exit_code) + " while stopping: " + last_line(res.output);
        break;
      }
    }
    procs_.reset();
    store_.reset();
    return why;
  }

 private:
  // Posts a stop (kAbort after a failure), gives the ranks time to leave — `timeout_s` (plus
  // the grace) for a stop, whose closing barrier may wait on a slow peer; kStopGraceS after an abort, which
  // healthy ranks see within milliseconds — and returns those that did not (killed).
  std::vector<int> shutdown(RankOp op = RankOp::kStop) {
    RankCommand s;
    s.op = op;
    s.seq = last_.seq + 1;
    post(s);
    // A stop waits kStopGraceS past timeout_s: peers of a stalled rank time out in that
    // barrier and leave first, so the ranks still running at the deadline are the stalled ones.
    const double wait_s = op == RankOp::kAbort ? kStopGraceS : timeout_s_ + kStopGraceS;
    const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
    while (procs_->running() > 0 && Clock::now() < deadline) procs_->poll(0.02);
    std::vector<int> stuck;
    for (int r = 0; r < world_; ++r) {
      if (!procs_->exited(r)) stuck.push_back(r);
    }
    procs_->kill_all();
    return stuck;
  }

  // Stops everything and says what happened, root cause first (driver/root_cause.h).
  std::string fail(int seq) {
    const RankCommand failed = last_;  // shutdown() posts the abort, which becomes last_
    std::vector<int> stuck;
    try {
      stuck = shutdown(RankOp::kAbort);
    } catch (const std::exception&) {
      procs_->kill_all();
    }
    std::vector<RankOutcome> ranks(world_);
    for (int r = 0; r < world_; ++r) {
      RankOutcome& o = ranks[r];
      o.rank = r;
      o.killed = std::find(stuck.begin(), stuck.end(), r) != stuck.end();
      o.exit_code = procs_->result(r).exit_code;
      o.last_line = last_line(procs_->result(r).output);
    }
    try {
      const int64_t n = store_->add(kFailCountKey, 0);
      for (int64_t i = 1; i <= n; ++i) {
        const RankReport f = RankReport::parse(store_get_string(*store_, failure_key(int(i))));
        if (f.rank < 0 || f.rank >= world_ || ranks[f.rank].failure) continue;
        ranks[f.rank].failure = f.error;
        ranks[f.rank].failure_order = static_cast<int>(i);
      }
    } catch (const std::exception&) {
      // Reports that cannot be read are replaced by the exit statuses.
    }
    try {
      for (int r = 0; r < world_; ++r) {
        ranks[r].answered = store_->check({report_key(seq, r)});
        if (store_->check({progress_key(r)})) {
          ranks[r].mark = ProgressMark::parse(store_get_string(*store_, progress_key(r)));
        }
      }
    } catch (const std::exception&) {
      // Unknown: no rank is named stalled.
      for (auto& o : ranks) o.answered = true;
    }
    const std::vector<std::string> parts =
        attribute_failure(ranks, op_name(failed.op), seq, timeout_s_, kStopGraceS);
    procs_.reset();
    store_.reset();
    if (parts.empty()) {
      return "ranks stopped without reporting during " + std::string(op_name(failed.op));
    }
    std::ostringstream m;
    m << parts[0];
    if (parts.size() > 1) {
      m << " (then:";
      for (size_t i = 1; i < parts.size(); ++i) m << " [" << parts[i] << "]";
      m << ")";
    }
    return m.str();
  }

  int world_;
  double timeout_s_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<RankProcesses> procs_;
  RankCommand last_;
};

}  // namespace

std::unique_ptr<RankDriver> make_process_driver(const LiveRankConfig& config,
                                                const std::string& worker) {
  return std::make_unique<ProcessDriver>(config, worker);
}

}  // namespace shardgym::live
