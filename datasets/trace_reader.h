// TraceReader: opens a `shardgym-trace` file and hands its episodes back as plain data.
//
//   TraceReader trace("run.h5");
//   for (const auto& info : trace.episodes()) {
//     if (!info.complete) continue;              // the writer was killed during it
//     TraceEpisode ep = trace.read_episode(info.index);
//   }
//
// Every failure is a std::runtime_error whose message starts with "trace '<path>': " and says
// what is wrong: missing file, not an HDF5 file, truncated file, not a shardgym trace,
// unsupported schema version, locked by a writer, a dataset of the wrong shape. HDF5's own
// error printing is silenced; a damaged file never takes the process down with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "datasets/trace.h"

namespace shardgym {

class TraceReader {
 public:
  explicit TraceReader(const std::string& path);
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  const std::string& path() const;
  const TraceAttributes& attributes() const;
  const std::vector<std::string>& strategies() const;
  // Every episode group, complete or not, by index. An episode whose group cannot be read
  // (damaged by a kill) is listed as incomplete with `error` saying why.
  const std::vector<TraceEpisodeInfo>& episodes() const;
  int complete_episodes() const;
  // Episode K (the K of "episode_K"). Throws if absent or incomplete.
  TraceEpisode read_episode(int index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardgym
