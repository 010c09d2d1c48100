// Published runs given as a table, one measured run per row (docs/published-runs.md, table D):
// the CSV of VIA-Research/vTrain's `data/ground_truth_single.csv`, with its header
//   # GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,
//   tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)
// A validation config names it (`published: {table: FILE}`) and supplies everything a row does
// not: the cluster's device and link, dtype, vocabulary, recomputation (validate-sim).
//
// The file is untrusted: it is read as text only, at most kMaxTableRows rows of at most
// kMaxTableLine characters, every field a plain decimal number in a stated range; anything
// else is refused naming the file, the line and the column.
#pragma once

#include <string>
#include <vector>

namespace shardgym {

inline constexpr int kMaxTableRows = 100000;
inline constexpr size_t kMaxTableLine = 4096;

struct TableRun {
  int line = 0;  // in the file, 1-based
  int gpus = 0, global_batch = 0, micro_batch = 0, hidden = 0, heads = 0, layers = 0, seq = 0;
  int tp = 0, dp = 0, pp = 0;
  double iteration_ms = 0;
};

// Throws std::invalid_argument "FILE:LINE: column NAME: reason" on a bad row, or when the
// parallel degrees do not multiply to the GPUs or the micro-batches do not divide the batch.
std::vector<TableRun> read_published_table(const std::string& path);

}  // namespace shardgym
