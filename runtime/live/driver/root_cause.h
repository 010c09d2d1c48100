// Naming the root cause of a failed process-launched run from what each rank left behind.
//
// Why progress marks: when a rank stops taking part, its peers block in the next operation
// that needs it (a group's rendezvous, a collective) and fail there after timeout_s, each with
// an error of its own; a peer that fails outside the command loop (while creating a group)
// exits without a report. Exit statuses and reports alone then cannot tell the rank that
// stopped from the ranks blocked behind it (docs/robustness.md: one stall-proc trial in 100
// named a peer's group-creation timeout). So every rank records in the store, before each
// blocking step, how far it got (ProgressMark): the driver names the rank that got least far
// (and, among ranks equally far in a rendezvous, the one that arrived last) and lists the
// others as blocked behind it.
//
// Pure data and logic (no LibTorch, no store): the process driver fills RankOutcome from the
// store and its children, tests/live/root_cause_test.cpp replays situations by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardgym::live {

// How far a rank got, comparable across ranks: levels increase along every rank's path
//   started (store reached) < start gate passed, creating the world group
//   < creating standard group i (canonical order, launch/group_sets.h)
//   < waiting for command N < in command N < waiting for command N+1 ...
// `ticket` orders marks of all ranks in time (a store counter: no clocks compared).
struct ProgressMark {
  int64_t level = -1;
  int64_t ticket = 0;
  std::string what;  // for messages: "creating group [0,1,2,3]", "in step (command 3)"

  static ProgressMark started();
  static ProgressMark world(const std::string& ranks);
  static ProgressMark group(int index, const std::string& ranks);
  static ProgressMark waiting(int seq);
  static ProgressMark in_command(int seq, const std::string& op);
  bool in_rendezvous() const;  // at the start gate, creating the world or a group

  std::string serialize() const;  // "level ticket what"
  static std::optional<ProgressMark> parse(const std::string& text);  // nullopt if malformed
};

// What the driver knows of one rank once every rank has exited or been killed.
struct RankOutcome {
  int rank = 0;
  std::optional<ProgressMark> mark;  // none: the rank never reached the store
  bool answered = false;  // replied (ok or not) to the command that failed
  std::optional<std::string> failure;  // the error of its failure report, if it wrote one
  int failure_order = 0;               // 1, 2, ... in the order the reports were written
  int exit_code = 0;                   // -signal when killed by a signal
  bool killed = false;                 // still running after the abort's grace: killed
  std::string last_line;               // the last line of its output
};

// The messages, root cause first: "rank 1 stalled: ...", "rank 2 died (...)", "rank 0
// failed: ...", "rank 3 blocked in creating group [0,1,2,3] behind rank 1; killed", ...
// `op` and `seq`: the command that failed; `timeout_s`, `grace_s` for the stalled message.
std::vector<std::string> attribute_failure(const std::vector<RankOutcome>& ranks,
                                           const std::string& op, int seq, double timeout_s,
                                           double grace_s);

}  // namespace shardgym::live
