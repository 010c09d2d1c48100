// What the trace-reading child process sends back to its parent (trace_reader.cpp reads every
// trace in a child, see isolated_read.h): the header of a trace, or one episode, as bytes.
//
//   std::string bytes = encode(header);            // in the child
//   TraceHeader back = decode_header(bytes);       // in the parent
//
// The encoding is private to one build (no version, native byte order): it never leaves the
// pipe between a parent and the child it forked. The decoders still treat it as untrusted,
// since a child that parsed a crafted file may be corrupted: every length is checked against
// the bytes left before anything is allocated, and a malformed message is a
// std::runtime_error, never a crash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "datasets/trace.h"

namespace shardgym {

// Everything TraceReader's constructor learns from a file.
struct TraceHeader {
  TraceAttributes attributes;
  std::vector<std::string> strategies;
  std::vector<TraceEpisodeInfo> episodes;
};

std::string encode(const TraceHeader& header);
std::string encode(const TraceEpisode& episode);
TraceHeader decode_header(std::string_view bytes);
TraceEpisode decode_episode(std::string_view bytes);

}  // namespace shardgym
