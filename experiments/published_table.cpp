#include "experiments/published_table.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace shardgym {
namespace {

constexpr const char* kColumns[] = {"GPUs",          "global batch",      "micro batch",
                                    "hidden size",   "attention heads",   "layers",
                                    "sequence length", "tensor parallelism", "data parallelism",
                                    "pipeline parallelism", "iteration time (ms)"};
constexpr int kColumnCount = 11;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

}  // namespace

std::vector<TableRun> read_published_table(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument(path + ": cannot read");
  std::vector<TableRun> rows;
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(path + ":" + std::to_string(number) + ": " + what);
  };
  while (true) {
    line.clear();
    // getline with a bound: a line longer than kMaxTableLine is refused, never buffered whole.
    char c;
    bool any = false;
    while (f.get(c)) {
      any = true;
      if (c == '\n') break;
      if (line.size() == kMaxTableLine) {
        ++number;
        fail("line longer than " + std::to_string(kMaxTableLine) + " characters");
      }
      line += c;
    }
    if (!any) break;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (number == 1 && line[0] == '#') continue;  // the header
    if (static_cast<int>(rows.size()) == kMaxTableRows)
      fail("more than " + std::to_string(kMaxTableRows) + " rows");
    const std::vector<std::string> fields = split(line);
    if (static_cast<int>(fields.size()) != kColumnCount)
      fail(std::to_string(fields.size()) + " columns, expected " + std::to_string(kColumnCount));
    double v[kColumnCount];
    for (int i = 0; i < kColumnCount; ++i) {
      const std::string& s = fields[i];
      const bool plain = !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos;
      char* end = nullptr;
      errno = 0;
      v[i] = plain ? std::strtod(s.c_str(), &end) : 0;
      if (!plain || errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v[i]))
        fail(std::string("column ") + kColumns[i] + ": '" + s + "' is not a plain number");
      const bool whole = i + 1 < kColumnCount;
      const double most = i == 10 ? 1e9 : (i == 3 ? 1e6 : 1e7);
      if (!(v[i] > 0 && v[i] <= most) || (whole && v[i] != std::floor(v[i])))
        fail(std::string("column ") + kColumns[i] + ": " + s + " is not " +
             (whole ? "a whole number" : "a number") + " in (0, " + std::to_string(long(most)) +
             "]");
    }
    TableRun r;
    r.line = number;
    r.gpus = int(v[0]), r.global_batch = int(v[1]), r.micro_batch = int(v[2]);
    r.hidden = int(v[3]), r.heads = int(v[4]), r.layers = int(v[5]), r.seq = int(v[6]);
    r.tp = int(v[7]), r.dp = int(v[8]), r.pp = int(v[9]);
    r.iteration_ms = v[10];
    if (int64_t(r.tp) * r.dp * r.pp != r.gpus)
      fail("tensor x data x pipeline parallelism (" + std::to_string(r.tp) + " x " +
           std::to_string(r.dp) + " x " + std::to_string(r.pp) + ") is not the " +
           std::to_string(r.gpus) + " GPUs");
    if (r.global_batch % (int64_t(r.micro_batch) * r.dp) != 0)
      fail("micro-batch " + std::to_string(r.micro_batch) + " x data parallelism " +
           std::to_string(r.dp) + " does not divide the global batch " +
           std::to_string(r.global_batch));
    rows.push_back(r);
  }
  if (rows.empty()) throw std::invalid_argument(path + ": no rows");
  return rows;
}

}  // namespace shardgym
