// Crash safety, for real: a forked child writes episodes and SIGKILLs itself mid-episode; the
// parent opens what is left and checks every finished episode element by element. Kill
// points cover the first episode, several steps into later ones, right after begin_episode,
// right after end_episode, past 8 episodes (links of /episodes in dense storage), and wide
// observations whose chunks leave the chunk cache (and hit the disk) while the episode is open.
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "datasets/trace_reader.h"
#include "datasets/trace_summary.h"
#include "datasets/trace_writer.h"
#include "tests/datasets/trace_fixtures.h"

namespace shardgym {
namespace {

using namespace tracetest;

struct KillPoint {
  int episode;  // killed while writing this episode (episodes before it are finished)
  int steps;    // after this many record_step calls of it; -1: right after the previous end
  int obs_dim;
};

// Child: never returns. Exit code 3 means the writer threw before the kill point.
[[noreturn]] void write_then_die(const std::string& path, KillPoint k) {
  try {
    TraceWriter w(path, metadata());
    write_episodes(w, 0, k.episode, k.obs_dim);
    if (k.steps >= 0) {
      const int e = k.episode;
      w.begin_episode(env_spec(), 100 + e, reset_result(e, k.obs_dim));
      for (int t = 0; t < k.steps; ++t) {
        w.record_step(action(e, t), step_result(e, t, k.obs_dim));
      }
    }
    raise(SIGKILL);
  } catch (...) {
  }
  _exit(3);
}

void run_child(const std::string& path, KillPoint k) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) write_then_die(path, k);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "child exited with code " << WEXITSTATUS(status) << " instead of being killed";
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
}

class TraceCrash : public ::testing::TestWithParam<KillPoint> {};

TEST_P(TraceCrash, FinishedEpisodesSurviveSigkill) {
  const KillPoint k = GetParam();
  const std::string name = "kill_e" + std::to_string(k.episode) + "_s" + std::to_string(k.steps) +
                           "_d" + std::to_string(k.obs_dim);
  const std::string path = (scratch_dir(name) / "t.h5").string();
  run_child(path, k);
  if (HasFatalFailure()) return;

  TraceReader r(path);  // must open: no exception here is the first half of the contract
  EXPECT_EQ(r.attributes().format, "shardgym-trace");
  ASSERT_EQ(r.complete_episodes(), k.episode);
  const size_t listed = static_cast<size_t>(k.episode) + (k.steps >= 0 ? 1 : 0);
  ASSERT_EQ(r.episodes().size(), listed);
  for (int e = 0; e < k.episode; ++e)
    expect_episode(r.read_episode(e), r.strategies(), e, k.obs_dim);
  if (k.steps >= 0) {
    const TraceEpisodeInfo& open = r.episodes().back();
    EXPECT_FALSE(open.complete);
    EXPECT_EQ(open.index, k.episode);
    EXPECT_THROW(r.read_episode(k.episode), std::runtime_error);
  }
  // The summary (what `shardgym inspect` prints) works on the damaged file too.
  const TraceSummary s = summarize_trace(path);
  EXPECT_EQ(s.complete_episodes(), k.episode);
}

INSTANTIATE_TEST_SUITE_P(
    KillPoints, TraceCrash,
    ::testing::Values(KillPoint{0, 0, 6},   // first episode just begun: nothing finished
                      KillPoint{0, 2, 6},   // first episode, mid-way
                      KillPoint{1, -1, 6},  // right after the first end_episode
                      KillPoint{1, 3, 6},   // second episode, several steps in
                      KillPoint{2, 0, 6},   // third episode just begun
                      KillPoint{2, 5, 6},   // third episode, several steps in
                      KillPoint{3, 8, 6},   // fourth episode, one step before its end
                      KillPoint{10, 6, 6},  // links of /episodes in dense storage (> 8)
                      // 32 KiB rows, 2 per chunk, 4 chunks in the cache: raw chunks of the
                      // open episode are compressed and written before the kill
                      KillPoint{4, 10, 8192}, KillPoint{5, 12, 8192}),
    [](const ::testing::TestParamInfo<KillPoint>& info) {
      const KillPoint& k = info.param;
      return "episode" + std::to_string(k.episode) + "_steps" +
             (k.steps < 0 ? std::string("none") : std::to_string(k.steps)) + "_dim" +
             std::to_string(k.obs_dim);
    });

// A reader that meets a trace still held by a live writer gets a clear error, not a hang.
TEST(TraceLock, ReaderOfAFileBeingWrittenGetsAClearError) {
  const std::string path = (scratch_dir("locked") / "t.h5").string();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    try {
      TraceWriter w(path, metadata());
      write_episodes(w, 0, 1, 4);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(4);
      pause();  // until the parent kills it
    } catch (...) {
    }
    _exit(3);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "writer child did not get ready";
  close(ready[0]);
  bool threw = false;
  try {
    TraceReader r(path);
    // Some file systems do not lock; then the flushed episode must be readable as is.
    EXPECT_EQ(r.complete_episodes(), 1);
  } catch (const std::runtime_error& e) {
    threw = true;
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("locked"), std::string::npos) << what;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  std::cout << "[   INFO   ] reader " << (threw ? "was refused (file lock)" : "read the file")
            << " while the writer held it\n";
  TraceReader after(path);
  EXPECT_EQ(after.complete_episodes(), 1);
}

}  // namespace
}  // namespace shardgym
