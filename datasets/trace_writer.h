// TraceWriter: the HDF5 TraceSink behind the RecordTrace wrapper (docs/design.md §6).
//
//   auto sink = std::make_shared<TraceWriter>("run.h5", make_trace_metadata(spec, sha));
//   auto env = std::make_unique<RecordTrace>(make_env(id, spec), sink);
//
// Every step is appended to extendable, chunked, compressed datasets; the file is flushed when
// an episode begins and when it ends. Crash contract: a process killed at any moment outside
// those flushes (SIGKILL included) leaves a file that opens, in which every episode that reached
// end_episode is intact and marked `complete = 1`; the episode in progress is left with
// `complete = 0`, and readers skip it. How: the metadata cache never evicts while an episode is
// open, so the file's metadata on disk is exactly what the last flush wrote (raw chunks written
// meanwhile land in fresh space that no flushed metadata points to), and the completeness flag
// is rewritten in place only after the episode's data has been flushed.
//
// The file is created (truncated if it exists). Not thread-safe: one env, one writer.
#pragma once

#include <memory>
#include <string>

#include "datasets/trace.h"
#include "env/wrappers.h"

namespace shardgym {

struct TraceWriterOptions {
  int deflate_level = 4;  // 0 = no compression (also used when HDF5 lacks deflate)
};

class TraceWriter : public TraceSink {
 public:
  // Throws std::runtime_error (naming the path) if the file cannot be created.
  TraceWriter(std::string path, TraceMetadata metadata, TraceWriterOptions options = {});
  ~TraceWriter() override;  // closes; an open episode stays incomplete
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // TraceSink. begin_episode while an episode is open ends that one first (a reset that cut
  // it short: its steps are kept, flags as recorded). Throws std::invalid_argument when the
  // sizes of a transition disagree with the episode's (obs D, action A, blocks B, ranks P).
  void begin_episode(const EnvSpec& spec, uint64_t seed, const ResetResult& r) override;
  void record_step(const Action& action, const StepResult& r) override;
  void end_episode() override;  // no-op when no episode is open

  // Agent attribute of the episodes that begin from now on.
  void set_agent(std::string agent);
  // Closes the file now (later calls throw std::logic_error).
  void close();

  const std::string& path() const;
  bool episode_open() const;
  int episodes_completed() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace shardgym
