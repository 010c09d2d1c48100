// read_published_table on arbitrary bytes (experiments/published_table.h: a table of measured
// runs is untrusted input). Expected errors are std::invalid_argument naming the file, line and
// column; any other exception escapes and libFuzzer reports it. Every table that is read obeys
// the reader's promises: at most kMaxTableRows rows, each with positive sizes, degrees that
// multiply to its GPUs and micro-batches that divide its global batch, lines in order.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "experiments/published_table.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/shardgym_published_table_fuzz_" +
                                  std::to_string(::getpid()) + ".csv";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  std::vector<shardgym::TableRun> rows;
  try {
    rows = shardgym::read_published_table(path);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(std::string(e.what()).rfind(path, 0) == 0, e.what());
    return 0;
  }
  FUZZ_CHECK(!rows.empty() && rows.size() <= size_t(shardgym::kMaxTableRows), "row count");
  int last = 0;
  for (const auto& r : rows) {
    FUZZ_CHECK(r.line > last, "lines out of order");
    last = r.line;
    FUZZ_CHECK(r.gpus > 0 && r.global_batch > 0 && r.micro_batch > 0 && r.hidden > 0 &&
                   r.heads > 0 && r.layers > 0 && r.seq > 0,
               "a size not positive on line " + std::to_string(r.line));
    FUZZ_CHECK(int64_t(r.tp) * r.dp * r.pp == r.gpus, "degrees on line " + std::to_string(r.line));
    FUZZ_CHECK(r.global_batch % (int64_t(r.micro_batch) * r.dp) == 0,
               "batch on line " + std::to_string(r.line));
    FUZZ_CHECK(std::isfinite(r.iteration_ms) && r.iteration_ms > 0,
               "time on line " + std::to_string(r.line));
  }
  return 0;
}
