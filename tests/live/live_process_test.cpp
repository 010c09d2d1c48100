// LiveRun with launch = processes: 4 shardgym_rank_worker processes meet through the
// driver's loopback TCPStore (micro-batch counts included); a rank killed from outside, and a
// stalled rank, stop the run with an error naming them, and no process is left behind.
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/driver/live_run.h"
#include "tests/live/live_test_spec.h"

namespace shardgym::live {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool alive(int pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

ExperimentSpec process_spec() {
  ExperimentSpec s = tiny_live_spec(4, "processes");
  s.live.extra.worker = SHARDGYM_RANK_WORKER_EXE;
  return s;
}

TEST(LiveRunProcesses, FourRankProcessesTrainAndRepartition) {
  LiveRun run(process_spec());
  const int blocks = run.model().num_blocks();
  const Plan a = Plan::uniform(Strategy::tp1d(4), blocks);
  const Plan b = Plan::parse("tp2d(d1=2,d2=2,first=col);tp1d(t=2,sp=1);dp;tp1d(t=4)", blocks);
  run.reset(5, a);
  const auto pids = run.rank_pids();
  ASSERT_EQ(pids.size(), 4u);
  double first = 0, last = 0;
  for (int i = 0; i < 6; ++i) {
    const Measurement m = run.step(i == 3 ? b : run.plan());
    ASSERT_TRUE(m.ok) << m.error;
    ASSERT_EQ(m.peak_memory_bytes.size(), 4u);
    for (double peak : m.peak_memory_bytes) EXPECT_GT(peak, 0);
    if (i == 3) {
      EXPECT_GT(m.repartition_bytes, 0);
    }
    (i == 0 ? first : last) = m.loss;
  }
  EXPECT_LT(last, first);  // 6 AdamW steps at lr 1e-2 from ln(256): a clear drop
  EXPECT_TRUE(std::isfinite(run.eval_loss(1)));
}

// Pipeline stages in rank processes: from one seed, 1F1B over 2 stages, a boundary move and a
// GPipe plan train the losses of the same blocks on one stage (float64).
TEST(LiveRunProcesses, PipelineStagesTrainInRankProcesses) {
  ExperimentSpec spec = process_spec();
  spec.live.precision = "float64";
  spec.model.layers = 4;
  const std::string one = "uniform:tp1d(t=2)@pp(m=2)";
  expect_losses_of_one_stage(spec,
                             std::vector<std::string>{
                                 "uniform:tp1d(t=2)@pp(p=2,m=2)",
                                 "uniform:tp1d(t=2)@pp(p=2,m=2,split=1/3)",
                                 "uniform:tp1d(t=2)@pp(p=2,m=2,split=1/3,schedule=gpipe)"},
                             {one, one, one});
}

// The collectives microbenchmark command reaches rank processes too (live_run_test has the
// thread case and the details).
TEST(LiveRunProcesses, TimeCollectivesInRankProcesses) {
  LiveRun run(process_spec());
  run.reset(5, Plan::uniform(Strategy::tp1d(4), run.model().num_blocks()));
  const auto timings = run.time_collectives(4096, 2);
  ASSERT_FALSE(timings.empty());
  for (const auto& t : timings) EXPECT_GT(t.seconds, 0) << t.op;
  EXPECT_EQ(timings.back().op, "p2p");  // the stage boundaries, last
}

// The micro-batch count crosses the store channel: rank processes given m = 2 hold half the
// activations at a time (peaks well below the whole batch's at these activation-heavy shapes)
// and train to the same losses (float64: only the order of the sums differs).
TEST(LiveRunProcesses, MicroBatchesReachTheRankProcesses) {
  ExperimentSpec spec = process_spec();
  spec.model.layers = 4;
  spec.model.hidden = 64;
  spec.model.seq = 64;
  spec.live.precision = "float64";
  LiveRun whole(spec), micro(spec);
  micro.set_micro_batches(2);
  const Plan plan = Plan::uniform(Strategy::tp1d(2), spec.model.num_blocks());
  const auto steps =
      expect_same_losses(whole, micro, {{plan, plan}, {plan, plan}, {plan, plan}}, 7);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& [mw, mm] = steps[i];
    ASSERT_TRUE(mw.ok && mm.ok);
    ASSERT_EQ(mm.peak_memory_bytes.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      EXPECT_LT(mm.peak_memory_bytes[r], 0.9 * mw.peak_memory_bytes[r])
          << "step " << i << ", rank " << r;
    }
  }
}

TEST(LiveRunProcesses, KillingOneRankStopsTheRunWithinTheTimeout) {
  ExperimentSpec spec = process_spec();
  LiveRun run(spec);
  const int blocks = run.model().num_blocks();
  run.reset(0, Plan::uniform(Strategy::tp1d(2), blocks));
  ASSERT_TRUE(run.step(run.plan()).ok);
  const auto pids = run.rank_pids();
  ASSERT_EQ(::kill(pids[2], SIGKILL), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Measurement m = run.step(run.plan());
  EXPECT_LT(since(t0), spec.live.timeout_s);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("rank 2 died (killed by signal 9) during step"), std::string::npos)
      << m.error;
  EXPECT_FALSE(run.running());
  for (int pid : pids) EXPECT_FALSE(alive(pid)) << "rank process " << pid << " left behind";
}

// Peers time out in their collective (timeout_s), the driver aborts, and the stalled rank gets
// kStopGraceS to exit before it is killed (it used to get another full timeout_s: 2× in all).
TEST(LiveRunProcesses, AStalledRankIsKilledWithinTheTimeoutPlusGrace) {
  ExperimentSpec spec = process_spec();
  spec.live.timeout_s = 1.5;
  spec.live.extra.fault = "stall@1:1";
  LiveRun run(spec);
  run.reset(0, Plan::uniform(Strategy::tp1d(4), run.model().num_blocks()));
  ASSERT_TRUE(run.step(run.plan()).ok);
  const auto pids = run.rank_pids();
  const auto t0 = std::chrono::steady_clock::now();
  const Measurement m = run.step(run.plan());
  EXPECT_LT(since(t0), spec.live.timeout_s + kEndGraceS);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.error.find("live step 1: rank 1 stalled: no answer to step (command 3)"), 0u)
      << m.error;
  for (int pid : pids) EXPECT_FALSE(alive(pid)) << "rank process " << pid << " left behind";
}

// A rank process that stalls between episodes (stopped from outside after the last step) is
// named when the next episode starts, killed, and the reset fails: it used to be killed
// silently and the run went on (exit status 0). After the last episode, the same stall is
// kept for the command's exit status (note_late_failure).
TEST(LiveRunProcesses, ARankThatStallsBetweenEpisodesFailsTheNextReset) {
  ExperimentSpec spec = process_spec();
  spec.live.timeout_s = 1.5;
  const Plan plan = Plan::uniform(Strategy::tp1d(4), spec.model.num_blocks());
  {
    LiveRun run(spec);
    run.reset(0, plan);
    ASSERT_TRUE(run.step(plan).ok);
    const auto pids = run.rank_pids();
    ASSERT_EQ(::kill(pids[1], SIGSTOP), 0);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      run.reset(1, plan);
      FAIL() << "expected the reset to fail";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).find(
                    "live reset: between episodes: rank 1 stalled: no answer to stop"),
                0u)
          << e.what();
    }
    EXPECT_LT(since(t0), spec.live.timeout_s + 2 * kEndGraceS);
    EXPECT_FALSE(run.running());
    for (int pid : pids) EXPECT_FALSE(alive(pid)) << "rank process " << pid << " left behind";
  }
  take_late_failures();
  {
    LiveRun run(spec);
    run.reset(0, plan);
    ASSERT_TRUE(run.step(plan).ok);
    ASSERT_EQ(::kill(run.rank_pids()[2], SIGSTOP), 0);
  }
  const auto late = take_late_failures();
  ASSERT_EQ(late.size(), 1u);
  EXPECT_NE(late[0].find("after its last episode: rank 2 stalled"), std::string::npos) << late[0];
}

// A rank process that takes longer than timeout_s to start (loading LibTorch on a busy
// machine) is not a stalled rank: the others wait at the start gate, not in the world's
// rendezvous, whose timeout_s used to expire on them ("creating group [0,1,2,3] failed:
// Socket Timeout", docs/robustness.md).
TEST(LiveRunProcesses, ASlowStartingRankIsNotAFailure) {
  ExperimentSpec spec = process_spec();
  spec.live.timeout_s = 1;
  ::setenv("SHARDGYM_TEST_RANK_START_DELAY", "2:2.5", 1);
  LiveRun run(spec);
  const auto t0 = std::chrono::steady_clock::now();
  run.reset(0, Plan::uniform(Strategy::tp1d(4), run.model().num_blocks()));
  ::unsetenv("SHARDGYM_TEST_RANK_START_DELAY");
  EXPECT_GT(since(t0), 2.5);
  const Measurement m = run.step(run.plan());
  EXPECT_TRUE(m.ok) << m.error;
}

}  // namespace
}  // namespace shardgym::live
