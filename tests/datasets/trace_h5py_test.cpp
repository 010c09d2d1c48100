// The documented layout is enough for h5py: tests/datasets/read_trace.py reads traces written
// here (a clean one and one left by a SIGKILLed writer) with nothing but h5py and numpy, and
// checks shapes, dtypes, attributes and values against the fixture formulas.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "datasets/trace_writer.h"
#include "tests/datasets/trace_fixtures.h"

namespace shardgym {
namespace {

using namespace tracetest;
namespace fs = std::filesystem;

const char* kPython = "/usr/bin/python3";

std::string script() {
  const char* src = std::getenv("SHARDGYM_SOURCE_DIR");
  return (fs::path(src ? src : ".") / "tests/datasets/read_trace.py").string();
}

void require_h5py() {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing";
  if (std::system((std::string(kPython) + " -c 'import h5py, numpy' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "h5py / numpy not importable by " << kPython;
  }
  if (!fs::exists(script())) GTEST_SKIP() << script() << " not found (SHARDGYM_SOURCE_DIR unset?)";
}

int run_reader(const std::string& trace, int complete, int dim, int incomplete) {
  const std::string cmd = std::string(kPython) + " " + script() + " '" + trace + "' " +
                          std::to_string(complete) + " " + std::to_string(dim) + " " +
                          std::to_string(incomplete);
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TraceH5py, CleanTrace) {
  require_h5py();
  if (IsSkipped()) return;
  const std::string path = (scratch_dir("h5py_clean") / "t.h5").string();
  {
    TraceWriter w(path, metadata());
    write_episodes(w, 0, 3, 7);
  }
  EXPECT_EQ(run_reader(path, 3, 7, 0), 0);
}

TEST(TraceH5py, TraceLeftByAKilledWriter) {
  require_h5py();
  if (IsSkipped()) return;
  const std::string path = (scratch_dir("h5py_killed") / "t.h5").string();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      TraceWriter w(path, metadata());
      write_episodes(w, 0, 2, 7);
      w.begin_episode(env_spec(), 102, reset_result(2, 7));
      for (int t = 0; t < 3; ++t) w.record_step(action(2, t), step_result(2, t, 7));
      raise(SIGKILL);
    } catch (...) {
    }
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(run_reader(path, 2, 7, 1), 0);
}

}  // namespace
}  // namespace shardgym
