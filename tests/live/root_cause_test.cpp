// attribute_failure (runtime/live/driver/root_cause.h): the root cause of a failed
// process-launched run, from hand-made rank outcomes. The first case is the situation of the
// stall-proc trial that named the wrong rank (docs/robustness.md).
#include "runtime/live/driver/root_cause.h"

#include <gtest/gtest.h>

namespace shardgym::live {
namespace {

ProgressMark at(ProgressMark m, int64_t ticket) {
  m.ticket = ticket;
  return m;
}

RankOutcome outcome(int rank, ProgressMark mark, int exit_code) {
  RankOutcome o;
  o.rank = rank;
  o.mark = mark;
  o.exit_code = exit_code;
  return o;
}

RankOutcome killed(int rank, ProgressMark mark) {
  RankOutcome o = outcome(rank, mark, -9);
  o.killed = true;
  return o;
}

RankOutcome died(int rank, ProgressMark mark, int code, const std::string& line) {
  RankOutcome o = outcome(rank, mark, code);
  o.last_line = line;
  return o;
}

RankOutcome reported(int rank, ProgressMark mark, int order, const std::string& error) {
  RankOutcome o = outcome(rank, mark, 1);
  o.answered = true;
  o.failure = error;
  o.failure_order = order;
  return o;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<std::string> attribute(const std::vector<RankOutcome>& ranks, const std::string& op,
                                   int seq) {
  return attribute_failure(ranks, op, seq, /*timeout_s=*/2, /*grace_s=*/1);
}

// The trial: rank 2 timed out creating the world group and exited without a report; ranks 0
// and 3 were blocked in the same rendezvous, rank 1 had not reached it. It used to read
// "rank 2 died ... Socket Timeout" with ranks 0, 1 and 3 all "stalled".
TEST(RootCause, TheRankThatNeverReachedTheRendezvousIsTheCause) {
  const std::string world = "[0,1,2,3]";
  const auto parts = attribute(
      {killed(0, at(ProgressMark::world(world), 5)), killed(1, at(ProgressMark::started(), 2)),
       died(2, at(ProgressMark::world(world), 4), 1,
            "rank 2 failed: rank 2: creating group [0,1,2,3] failed: Socket Timeout"),
       killed(3, at(ProgressMark::world(world), 6))},
      "reset", 1);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_TRUE(starts_with(parts[0], "rank 1 stalled: no answer to reset (command 1)")) << parts[0];
  EXPECT_NE(parts[0].find("last progress: starting"), std::string::npos) << parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    EXPECT_NE(parts[i].find("creating the world group [0,1,2,3]"), std::string::npos) << parts[i];
    EXPECT_NE(parts[i].find("behind rank 1"), std::string::npos) << parts[i];
  }
  // The rank that timed out is reported as blocked, with its own words, after the others
  // (it arrived first).
  EXPECT_TRUE(starts_with(parts[3], "rank 2 died (exited with status 1) creating the world group"))
      << parts[3];
  EXPECT_NE(parts[3].find("Socket Timeout"), std::string::npos) << parts[3];
}

// The same in a later rendezvous: the rank still in an earlier group is the one the others
// wait for, whatever the exit order.
TEST(RootCause, TheRankInAnEarlierGroupIsTheCause) {
  const auto parts = attribute(
      {died(0, at(ProgressMark::group(5, "[0,1]"), 9), 1, "Socket Timeout"),
       killed(1, at(ProgressMark::group(3, "[1,3]"), 7)),
       died(2, at(ProgressMark::group(6, "[2,3]"), 8), 1, "Socket Timeout"),
       killed(3, at(ProgressMark::group(6, "[2,3]"), 10))},
      "reset", 1);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_TRUE(starts_with(parts[0], "rank 1 stalled: no answer to reset (command 1)")) << parts[0];
  EXPECT_NE(parts[0].find("creating group [1,3]"), std::string::npos) << parts[0];
}

// Everyone reached the rendezvous but one arrived too late for a peer's timeout: the last
// to arrive is named.
TEST(RootCause, InOneRendezvousTheLastToArriveIsTheCause) {
  const auto world = ProgressMark::world("[0,1,2]");
  const auto parts = attribute({died(0, at(world, 3), 1, "Socket Timeout"),
                                killed(1, at(world, 11)), killed(2, at(world, 4))},
                               "reset", 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(starts_with(parts[0], "rank 1 stalled")) << parts[0];
  // Then the others, latest arrival first.
  EXPECT_TRUE(starts_with(parts[1], "rank 2 blocked creating the world group [0,1,2] behind "
                                    "rank 1; killed"))
      << parts[1];
  EXPECT_TRUE(starts_with(parts[2], "rank 0 died (exited with status 1) creating the world"))
      << parts[2];
}

// The injected stall-proc fault as it normally ends: peers time out in the step's collective
// and report; the stalled rank never answers and is killed.
TEST(RootCause, AStalledRankBeforeItsPeersTimeouts) {
  const auto step = ProgressMark::in_command(3, "step");
  const auto parts = attribute({reported(0, at(step, 20), 2, "step (command 3): timed out"),
                                killed(1, at(step, 19)),
                                reported(2, at(step, 21), 1, "step (command 3): timed out"),
                                reported(3, at(step, 22), 3, "step (command 3): timed out")},
                               "step", 3);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_TRUE(starts_with(parts[0], "rank 1 stalled: no answer to step (command 3) while its "
                                    "peers waited up to timeout_s = 2 s"))
      << parts[0];
  EXPECT_TRUE(starts_with(parts[1], "rank 2 failed"));  // failure order, not rank order
  EXPECT_TRUE(starts_with(parts[2], "rank 0 failed"));
  EXPECT_TRUE(starts_with(parts[3], "rank 3 failed"));
}

TEST(RootCause, AThrowingRankIsTheCause) {
  const auto step = ProgressMark::in_command(3, "step");
  const auto parts =
      attribute({reported(0, at(step, 20), 2, "step (command 3): Connection closed by peer"),
                 reported(1, at(step, 19), 1, "step (command 3): injected fault (throw)"),
                 reported(2, at(step, 21), 3, "step (command 3): Connection closed by peer")},
                "step", 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "rank 1 failed: step (command 3): injected fault (throw)");
}

// A rank killed by a signal in the step, a peer killed while still idle before it: the death
// is the cause; the idle rank was waiting for the command, not blocking anyone.
TEST(RootCause, ADeathBeatsARankThatWasWaitingForTheCommand) {
  const auto parts = attribute(
      {reported(0, at(ProgressMark::in_command(3, "step"), 20), 1, "step (command 3): closed"),
       killed(1, at(ProgressMark::waiting(3), 18)),
       died(2, at(ProgressMark::in_command(3, "step"), 19), -9, "")},
      "step", 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "rank 2 died (killed by signal 9) during step (command 3)");
  EXPECT_TRUE(starts_with(parts[1], "rank 0 failed"));
  EXPECT_EQ(parts[2], "rank 1 was waiting for command 3 but did not exit within 1 s of the abort; "
                      "killed");
}

// A rank process killed from outside while it waited for the next command: the command
// finds it dead, and its peers fail on its closed sockets.
TEST(RootCause, ARankThatDiedWhileWaitingForTheCommand) {
  const auto step = ProgressMark::in_command(3, "step");
  const auto parts = attribute({reported(0, at(step, 20), 1, "step (command 3): reset by peer"),
                                reported(1, at(step, 21), 2, "step (command 3): closed by peer"),
                                died(2, at(ProgressMark::waiting(3), 12), -9, "")},
                               "step", 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "rank 2 died (killed by signal 9) during step (command 3), waiting for "
                      "command 3");
}

TEST(RootCause, ARankThatNeverReachedTheStore) {
  RankOutcome silent;
  silent.rank = 1;
  silent.killed = true;
  const auto parts = attribute(
      {died(0, at(ProgressMark::started(), 1), 1, "only 1 of 2 rank processes started"), silent},
      "reset", 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_NE(parts[0].find("rank 1 stalled"), std::string::npos) << parts[0];
  EXPECT_NE(parts[0].find("never reached the store"), std::string::npos) << parts[0];
}

TEST(RootCause, ProgressMarksRoundTrip) {
  const ProgressMark m = at(ProgressMark::group(4, "[0,2]"), 77);
  const auto back = ProgressMark::parse(m.serialize());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->level, m.level);
  EXPECT_EQ(back->ticket, 77);
  EXPECT_EQ(back->what, "creating group [0,2]");
  EXPECT_FALSE(ProgressMark::parse("no numbers here").has_value());
  // Levels follow every rank's path.
  EXPECT_LT(ProgressMark::started().level, ProgressMark::world("[0,1]").level);
  EXPECT_LT(ProgressMark::world("[0,1]").level, ProgressMark::group(0, "[0,1]").level);
  EXPECT_LT(ProgressMark::group(500, "[0,1]").level, ProgressMark::waiting(1).level);
  EXPECT_LT(ProgressMark::waiting(1).level, ProgressMark::in_command(1, "reset").level);
  EXPECT_LT(ProgressMark::in_command(1, "reset").level, ProgressMark::waiting(2).level);
}

}  // namespace
}  // namespace shardgym::live
