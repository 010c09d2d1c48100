// Reading an untrusted file in a child process, so that a crash or a hang of the parser cannot
// take the reader with it.
//
// Why: a trace is shared data, and HDF5 1.10 does not bounds-check everything it parses (its
// global heap, which holds every variable-length string, is one known case: one flipped bit
// can crash or hang every reader, h5py included). No check of ours can precede HDF5's own
// parsing, so the parsing runs in a forked child:
//
//   std::string bytes = read_isolated("trace 'run.h5'", limits, [&](std::string& out) {
//     out = encode(read_the_file());     // runs in the child
//   });
//
// `work` runs in a child forked from this process; what it leaves in `out` comes back over a
// pipe. A std::exception thrown by `work` is rethrown here as std::runtime_error with its
// message. A child killed by a signal (a crash in the parser), one that runs past
// `limits.timeout_s` (killed, then reaped), one that runs out of its memory allowance or sends
// more than `limits.max_reply_bytes` ends in a std::runtime_error starting with `what`: that
// the file is damaged, and how. No child is ever left behind.
//
// The child only calls `work` and _exit()s (no atexit handlers, no stdio flush of the
// parent's buffers). Caveat of fork(): a lock held by another thread of the parent at the time
// of the fork stays held in the child; `work` would block on it and end as a timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace shardgym {

struct IsolationLimits {
  double timeout_s = 120;            // wall clock for the whole read
  uint64_t max_reply_bytes = 1ull << 32;
  // Address space the child may add to what it inherits (RLIMIT_AS); 0 = no limit. Not
  // applied in AddressSanitizer builds, whose shadow memory needs terabytes of address space.
  uint64_t max_extra_memory_bytes = 1ull << 33;
};

std::string read_isolated(const std::string& what, const IsolationLimits& limits,
                          const std::function<void(std::string& out)>& work);

}  // namespace shardgym
