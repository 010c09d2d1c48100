// Progress: what a long-running command shows while it works. On a terminal a single line
// is rewritten in place (at most ~10 times a second, so printing never slows the loop); in a
// log or a pipe (CI) only finished lines are written, one per event worth keeping.
//
//   Progress p(std::cerr, Progress::stream_is_tty(stderr));
//   p.update("episode 1/3  step 17/50  mean reward 0.973");   // TTY only
//   p.line("episode 1/3 done: 50 steps, mean reward 0.981");    // always
#pragma once

#include <chrono>
#include <cstdio>
#include <ostream>
#include <string>

namespace shardgym {

class Progress {
 public:
  Progress(std::ostream& out, bool tty) : out_(out), tty_(tty) {}
  ~Progress();

  // Transient status: shown on a TTY (rate-limited unless `force`), dropped otherwise.
  void update(const std::string& text, bool force = false);
  // A permanent line (clears the transient one first on a TTY).
  void line(const std::string& text);

  bool tty() const { return tty_; }
  static bool stream_is_tty(std::FILE* stream);

 private:
  void clear();

  std::ostream& out_;
  bool tty_;
  bool showing_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace shardgym
