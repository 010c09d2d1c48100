#include "datasets/isolated_read.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <stdexcept>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHARDGYM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SHARDGYM_SANITIZED 1
#endif
#endif

namespace shardgym {

namespace {

using Clock = std::chrono::steady_clock;

// Reply: one tag byte, then the payload ('O': the result; 'E': an error message; 'M': the
// child ran out of memory).
constexpr char kOk = 'O', kError = 'E', kOutOfMemory = 'M';

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Virtual memory this process maps now (first field of /proc/self/statm, in pages).
uint64_t mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  const int got = std::fscanf(f, "%llu", &pages);
  std::fclose(f);
  return got == 1 ? pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

[[noreturn]] void child(int fd, const IsolationLimits& limits,
                        const std::function<void(std::string&)>& work) {
  // A crash in the parser ends this child by its signal, which the parent reports; the
  // parent's own crash handlers (a sanitizer's, a fuzzer's, a debugger's) must not run here.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
#ifndef SHARDGYM_SANITIZED
  if (limits.max_extra_memory_bytes > 0) {
    const uint64_t have = mapped_bytes();
    if (have > 0) {
      rlimit lim{};
      if (getrlimit(RLIMIT_AS, &lim) == 0) {
        const rlim_t want = have + limits.max_extra_memory_bytes;
        if (lim.rlim_cur == RLIM_INFINITY || want < lim.rlim_cur) lim.rlim_cur = want;
        setrlimit(RLIMIT_AS, &lim);
      }
    }
  }
#endif
  char tag = kOk;
  std::string out;
  try {
    work(out);
  } catch (const std::bad_alloc&) {
    tag = kOutOfMemory;
    out.clear();
  } catch (const std::exception& e) {
    tag = kError;
    out = e.what();
  } catch (...) {
    tag = kError;
    out = "unknown error";
  }
  const bool ok = write_all(fd, &tag, 1) && write_all(fd, out.data(), out.size());
  _exit(ok ? 0 : 3);
}

std::string signal_text(int sig) {
  const char* name = sigdescr_np(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(", ") + name : std::string());
}

}  // namespace

std::string read_isolated(const std::string& what, const IsolationLimits& limits,
                          const std::function<void(std::string&)>& work) {
  auto fail = [&](const std::string& why) -> std::runtime_error {
    return std::runtime_error(what + ": " + why);
  };
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw fail(std::string("cannot create a pipe: ") + strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    throw fail(std::string("cannot fork the reading process: ") + strerror(e));
  }
  if (pid == 0) {
    close(fds[0]);
    child(fds[1], limits, work);
  }
  close(fds[1]);

  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(limits.timeout_s));
  std::string reply;
  std::string problem;  // set when the child must be killed
  char buf[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      problem = "reading it did not finish within " + std::to_string(limits.timeout_s) +
                " s, so it was stopped: the file is damaged in a way that makes HDF5 loop "
                "(or, if it is just very large, raise SHARDGYM_TRACE_READ_TIMEOUT_S)";
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child has exited or is exiting
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > limits.max_reply_bytes + 1) {
      problem = "reading it produced more than " + std::to_string(limits.max_reply_bytes) +
                " bytes, the limit for one read";
      break;
    }
  }
  close(fds[0]);
  if (!problem.empty()) kill(pid, SIGKILL);
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (!problem.empty()) throw fail(problem);
  if (got == pid && WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    throw fail("the HDF5 library crashed reading it (" + signal_text(sig) +
               "): the file is damaged or was crafted to do that; nothing of it was used");
  }
  if (got == pid && WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    // A sanitizer's report ends the child this way instead of with a signal.
    throw fail("the HDF5 library failed reading it (its process exited with status " +
               std::to_string(WEXITSTATUS(status)) + "): the file is damaged");
  }
  if (reply.empty()) throw fail("the reading process ended without a reply");
  const char tag = reply[0];
  reply.erase(0, 1);
  if (tag == kOk) return reply;
  if (tag == kOutOfMemory) {
    throw fail("reading it needed more than the " +
               std::to_string(limits.max_extra_memory_bytes >> 20) +
               " MiB allowed: the file declares more data than it can hold, or is far larger "
               "than a trace should be");
  }
  if (tag == kError) throw std::runtime_error(reply);
  throw fail("malformed reply from the reading process");
}

}  // namespace shardgym
