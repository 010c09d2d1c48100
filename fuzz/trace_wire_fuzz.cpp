// The decoders of what the trace-reading child sends back (datasets/trace_wire.h), on
// arbitrary bytes: the one part of reading a trace that runs in the reader's own process on
// data derived from the file. The first byte picks header or episode. Expected errors are
// std::runtime_error; anything else escapes and libFuzzer reports it. For every message that
// decodes: the arrays agree with the dimensions they claim, and one more encode/decode round
// changes nothing (the first may normalise flags: any non-zero byte decodes to true).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "datasets/trace_wire.h"
#include "fuzz/fuzz_check.h"

using namespace shardgym;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    TraceHeader h;
    try {
      h = decode_header(bytes);
    } catch (const std::runtime_error&) {
      return 0;
    }
    const std::string once = encode(h);
    FUZZ_CHECK(encode(decode_header(once)) == once, "header round trip");
  } else {
    TraceEpisode ep;
    try {
      ep = decode_episode(bytes);
    } catch (const std::runtime_error&) {
      return 0;
    }
    const size_t n = ep.rewards.size();
    FUZZ_CHECK(ep.observations.size() == (n + 1) * size_t(ep.obs_dim), "observations");
    FUZZ_CHECK(ep.plans.size() == n * size_t(ep.num_blocks), "plans");
    FUZZ_CHECK(ep.peak_memory_bytes.size() == n * size_t(ep.world), "peak memory");
    FUZZ_CHECK(ep.steps() == ep.info.steps, "steps");
    const std::string once = encode(ep);
    FUZZ_CHECK(encode(decode_episode(once)) == once, "episode round trip");
  }
  return 0;
}
