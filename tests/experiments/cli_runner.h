// Runs the built `shardgym` CLI (SHARDGYM_CLI_PATH, set by tests/experiments/CMakeLists.txt)
// with stdin closed and returns its exit code and output, stdout and stderr together. Shared by
// the CLI tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace shardgym::testing {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline CliResult shardgym_cli(const std::string& args) {
  const std::string cmd = std::string("'") + SHARDGYM_CLI_PATH + "' " + args + " 2>&1 </dev/null";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A path in the source tree (SHARDGYM_TEST_SOURCE_DIR, set by tests/experiments/CMakeLists.txt).
inline std::string src(const std::string& rel) {
  return std::string(SHARDGYM_TEST_SOURCE_DIR) + "/" + rel;
}

// A scratch path for one test, removed if a run before left it: the temp folder's
// shardgym_cli_<tag>_<pid> (not created: the test makes the folder or lets the CLI write it).
inline std::filesystem::path scratch(const std::string& tag) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("shardgym_cli_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p;
}

}  // namespace shardgym::testing
