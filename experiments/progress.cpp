#include "experiments/progress.h"

#include <unistd.h>

namespace shardgym {

Progress::~Progress() { clear(); }

bool Progress::stream_is_tty(std::FILE* stream) { return ::isatty(::fileno(stream)) == 1; }

void Progress::update(const std::string& text, bool force) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && showing_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  out_ << "\r" << text << "\x1b[K" << std::flush;  // ESC[K: erase to the end of the line
  showing_ = true;
}

void Progress::line(const std::string& text) {
  clear();
  out_ << text << "\n" << std::flush;
}

void Progress::clear() {
  if (!showing_) return;
  out_ << "\r\x1b[K" << std::flush;
  showing_ = false;
}

}  // namespace shardgym
