// RankProcesses / run_processes: fork/exec of the rank processes, their output, their reaping.
#include "runtime/live/launch/process_ranks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace shardgym::live {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("run_processes: socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = strerror(errno);
    ::close(fd);
    throw std::runtime_error("run_processes: cannot find a free loopback port: " + err);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

struct ChildState {
  Clock::time_point started;
  pid_t pid = -1;
  int out_fd = -1;
  bool done = false;
  ProcessResult result;
};

void drain(ChildState& c) {
  char buf[4096];
  while (c.out_fd >= 0) {
    const ssize_t n = ::read(c.out_fd, buf, sizeof(buf));
    if (n > 0) {
      c.result.output.append(buf, static_cast<size_t>(n));
    } else {
      if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(c.out_fd);
        c.out_fd = -1;
      }
      return;
    }
  }
}

pid_t spawn(const std::vector<std::string>& argv, int rank, int world, int port,
            const std::vector<std::pair<std::string, std::string>>& extra_env, int* out_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("run_processes: pipe: ") + strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("run_processes: fork: ") + strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    for (const auto& [k, v] : extra_env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    const std::string err = "exec " + argv[0] + " failed: " + strerror(errno) + "\n";
    (void)!::write(2, err.data(), err.size());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  *out_fd = fds[0];
  return pid;
}

void reap(ChildState& c, bool block) {
  if (c.done) return;
  int status = 0;
  if (::waitpid(c.pid, &status, block ? 0 : WNOHANG) != c.pid) return;
  c.done = true;
  c.result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  c.result.exit_s = std::chrono::duration<double>(Clock::now() - c.started).count();
}

}  // namespace

struct RankProcesses::Child : ChildState {};

RankProcesses::RankProcesses(int world_size, const std::vector<std::string>& argv, int port,
                             const std::vector<std::pair<std::string, std::string>>& extra_env) {
  if (world_size < 1) throw std::invalid_argument("RankProcesses: world_size must be >= 1");
  if (argv.empty()) throw std::invalid_argument("RankProcesses: empty command");
  if (::access(argv[0].c_str(), X_OK) != 0) {
    throw std::invalid_argument("RankProcesses: '" + argv[0] + "' is not executable");
  }
  children_.resize(world_size);
  for (int r = 0; r < world_size; ++r) {
    children_[r].result.rank = r;
    children_[r].started = Clock::now();
    try {
      children_[r].pid = spawn(argv, r, world_size, port, extra_env, &children_[r].out_fd);
    } catch (...) {
      children_.resize(r);  // the destructor of this partial object will not run: clean up
      kill_all();
      throw;
    }
  }
}

RankProcesses::~RankProcesses() {
  kill_all();
  for (auto& c : children_) {
    if (c.out_fd >= 0) ::close(c.out_fd);
  }
}

void RankProcesses::poll(double wait_s) {
  std::vector<pollfd> pfds;
  for (auto& c : children_) {
    if (c.out_fd >= 0) pfds.push_back({c.out_fd, POLLIN, 0});
  }
  if (!pfds.empty() && wait_s > 0) ::poll(pfds.data(), pfds.size(), static_cast<int>(wait_s * 1e3));
  for (auto& c : children_) drain(c);
  for (auto& c : children_) reap(c, false);
}

int RankProcesses::running() const {
  int n = 0;
  for (const auto& c : children_) n += !c.done;
  return n;
}

bool RankProcesses::exited(int rank) const { return children_.at(rank).done; }

std::vector<int> RankProcesses::pids() const {
  std::vector<int> out;
  for (const auto& c : children_) out.push_back(c.pid);
  return out;
}

void RankProcesses::kill_all() {
  for (auto& c : children_) {
    if (!c.done && c.pid > 0) ::kill(c.pid, SIGKILL);
  }
  for (auto& c : children_) {
    if (c.pid > 0) reap(c, true);
    drain(c);
  }
}

const ProcessResult& RankProcesses::result(int rank) const { return children_.at(rank).result; }

std::vector<ProcessResult> run_processes(int world_size, const std::vector<std::string>& argv,
                                         double timeout_s) {
  // The launcher hosts the store, so no rank has to wait for rank 0's server to come up.
  ProcessEnv env;
  env.master_port = free_loopback_port();
  auto store = connect_store(env, /*is_server=*/true, timeout_s);
  RankProcesses procs(world_size, argv, env.master_port, {{"SHARDGYM_STORE_HOSTED", "1"}});
  bool failed = false;
  Clock::time_point deadline{};
  while (procs.running() > 0) {
    procs.poll(0.05);
    for (int r = 0; r < world_size && !failed; ++r) {
      if (procs.exited(r) && procs.result(r).exit_code != 0) {
        failed = true;
        deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
      }
    }
    if (failed && Clock::now() > deadline) procs.kill_all();
  }
  procs.poll(0);
  std::vector<ProcessResult> out;
  for (int r = 0; r < world_size; ++r) out.push_back(procs.result(r));
  return out;
}

}  // namespace shardgym::live
