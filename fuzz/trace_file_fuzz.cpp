// A whole trace file from arbitrary bytes, read the way `shardgym inspect` and replay read
// one: TraceReader (the HDF5 parse in a forked child, datasets/isolated_read.h), then every
// complete episode, then each episode's plans against the strategies table. Expected errors
// are std::runtime_error; a crash, a hang or a sanitizer report of *this* process is a
// finding. (A crash inside HDF5 happens in the child and comes back as an error: that is the
// protection under test. The child's own coverage is not seen by libFuzzer, so the byte-level
// mutations below are guided by the parent's code only; trace_wire_fuzz covers the decoder.)
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "datasets/trace_reader.h"
#include "fuzz/fuzz_check.h"

using namespace shardgym;

namespace {

std::string scratch_path() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/shardgym_trace_fuzz_" +
         std::to_string(::getpid()) + ".h5";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A damaged file that makes HDF5 loop is stopped by the reader's own watchdog, well
  // before libFuzzer's -timeout.
  setenv("SHARDGYM_TRACE_READ_TIMEOUT_S", "2", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path();
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  try {
    TraceReader reader(path);
    for (const TraceEpisodeInfo& info : reader.episodes()) {
      if (!info.complete) continue;
      const TraceEpisode ep = reader.read_episode(info.index);
      FUZZ_CHECK(ep.steps() == info.steps, info.name);
      for (int t = 0; t < ep.steps(); ++t) {
        try {
          ep.plan(t, reader.strategies());
        } catch (const std::runtime_error&) {
        } catch (const std::invalid_argument&) {  // a table entry that is not a strategy
        }
      }
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
