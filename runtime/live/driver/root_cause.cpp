#include "runtime/live/driver/root_cause.h"

#include <algorithm>
#include <sstream>

namespace shardgym::live {
namespace {

// Level bands (root_cause.h): a world has far fewer than kCommands standard groups.
constexpr int64_t kStarted = 0, kWorld = 1, kGroups = 2, kCommands = 1'000'000;

std::string exit_text(int code) {
  return code < 0 ? "killed by signal " + std::to_string(-code)
                  : "exited with status " + std::to_string(code);
}

std::string seconds(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

enum class Kind { kDied, kStalled };

struct Candidate {
  const RankOutcome* rank;
  Kind kind;
  int64_t level() const { return rank->mark ? rank->mark->level : -1; }
  int64_t ticket() const { return rank->mark ? rank->mark->ticket : 0; }
  bool rendezvous() const { return rank->mark && rank->mark->in_rendezvous(); }
};

std::string where(const RankOutcome& r) {
  return r.mark ? r.mark->what : "never reached the store";
}

}  // namespace

ProgressMark ProgressMark::started() { return {kStarted, 0, "starting"}; }
ProgressMark ProgressMark::world(const std::string& ranks) {
  return {kWorld, 0, "creating the world group " + ranks};
}
ProgressMark ProgressMark::group(int index, const std::string& ranks) {
  return {kGroups + index, 0, "creating group " + ranks};
}
ProgressMark ProgressMark::waiting(int seq) {
  return {kCommands + 2 * int64_t{seq}, 0, "waiting for command " + std::to_string(seq)};
}
ProgressMark ProgressMark::in_command(int seq, const std::string& op) {
  return {kCommands + 2 * int64_t{seq} + 1, 0,
          "in " + op + " (command " + std::to_string(seq) + ")"};
}
// The start gate counts: every rank waits there for all the others.
bool ProgressMark::in_rendezvous() const { return level >= kStarted && level < kCommands; }

std::string ProgressMark::serialize() const {
  return std::to_string(level) + " " + std::to_string(ticket) + " " + what;
}

std::optional<ProgressMark> ProgressMark::parse(const std::string& text) {
  std::istringstream in(text);
  ProgressMark m;
  if (!(in >> m.level >> m.ticket)) return std::nullopt;
  in.get();  // the space before `what`
  std::getline(in, m.what, '\0');
  return m;
}

std::vector<std::string> attribute_failure(const std::vector<RankOutcome>& ranks,
                                           const std::string& op, int seq, double timeout_s,
                                           double grace_s) {
  const std::string command = op + " (command " + std::to_string(seq) + ")";
  // Ranks that may have stopped the run without saying so: those that died without a report
  // and those that never answered and had to be killed. A rank that answered the command was
  // past it, and a live rank that had not picked the failing command up yet (still waiting
  // for it) was idle, not blocking anyone: neither can be what its peers waited for.
  std::vector<Candidate> cands;
  for (const RankOutcome& r : ranks) {
    if (r.failure || r.answered) continue;
    if (r.killed) {
      if (r.mark && r.mark->level == ProgressMark::waiting(seq).level) continue;
      cands.push_back({&r, Kind::kStalled});
    } else if (r.exit_code != 0) {
      cands.push_back({&r, Kind::kDied});
    }
  }
  // Least progress first. Equally far inside a rendezvous: the last to arrive first (the
  // others were waiting for it). Equally far inside a command: a death before a stall (a
  // crash explains its peers' timeouts), then rank order.
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.level() != b.level()) return a.level() < b.level();
    if (a.rendezvous()) return a.ticket() > b.ticket();
    return a.kind == Kind::kDied && b.kind == Kind::kStalled;
  });

  std::vector<std::string> parts;
  const Candidate* root = cands.empty() ? nullptr : &cands.front();
  for (const Candidate& c : cands) {
    const RankOutcome& r = *c.rank;
    const std::string name = "rank " + std::to_string(r.rank);
    const std::string tail = r.last_line.empty() ? "" : ": " + r.last_line;
    // Behind the root: further along, or equally far in a rendezvous the root arrived at last.
    const bool behind = &c != root && (c.level() > root->level() || c.rendezvous());
    if (behind) {
      const std::string root_name = "rank " + std::to_string(root->rank->rank);
      parts.push_back(c.kind == Kind::kDied
                          ? name + " died (" + exit_text(r.exit_code) + ") " + where(r) +
                                ", blocked behind " + root_name + tail
                          : name + " blocked " + where(r) + " behind " + root_name + "; killed");
    } else if (c.kind == Kind::kDied) {
      const bool in_it = r.mark && r.mark->level == ProgressMark::in_command(seq, op).level;
      parts.push_back(name + " died (" + exit_text(r.exit_code) + ") during " + command +
                      (r.mark && !in_it ? ", " + where(r) : "") + tail);
    } else {
      parts.push_back(name + " stalled: no answer to " + command +
                      " while its peers waited up to timeout_s = " + seconds(timeout_s) +
                      " s, and no exit within " + seconds(grace_s) +
                      " s of the abort; killed (last progress: " + where(r) + ")");
    }
  }
  std::vector<const RankOutcome*> failures;
  for (const RankOutcome& r : ranks) {
    if (r.failure) failures.push_back(&r);
  }
  std::stable_sort(failures.begin(), failures.end(), [](const auto* a, const auto* b) {
    return a->failure_order < b->failure_order;
  });
  for (const RankOutcome* r : failures) {
    parts.push_back("rank " + std::to_string(r->rank) + " failed: " + *r->failure);
  }
  // Killed without being a candidate: answered but slow to leave, or never took the command.
  for (const RankOutcome& r : ranks) {
    if (!r.killed || r.failure) continue;
    if (std::any_of(cands.begin(), cands.end(), [&](const Candidate& c) { return c.rank == &r; }))
      continue;
    parts.push_back("rank " + std::to_string(r.rank) +
                    (r.answered ? " answered" : " was " + where(r)) + " but did not exit within " +
                    seconds(grace_s) + " s of the abort; killed");
  }
  return parts;
}

}  // namespace shardgym::live
