// `shardgym bench live`: is the live runtime fast enough to be worth measuring?
//
// 1. Step time: one rank of the C++ live runtime (RankTrainer, plan uniform:dp on a world of
//    one) against the same GPT in Python PyTorch eager (runtime/live/bench/bench_live_eager.py run
//    with Debian's /usr/bin/python3 and python3-torch): same shapes, same initialisation
//    scheme, AdamW + clipping, same intra-op threads, side by side in one run. The target is
//    C++/Python ≤ 1.0. Both wall clock and process CPU time are recorded per step; the ratio
//    uses CPU time, which other jobs on a shared machine do not inflate (on an idle machine
//    the two agree). The C++ side's float32 products go through oneDNN's sgemm
//    (runtime/live/tp/gemm.h); eager writes `@` as a user would. Two variants show what that
//    is worth: C++ with oneDNN switched off (at::matmul), and eager allowed the same oneDNN
//    products (bench/bench_live_eager.py --gemm onednn).
// 2. Repartition cost: 4 rank threads move every block from one plan to another (parameters
//    and AdamW moments, only the slices a rank lacks) against a plain all-gather of the same
//    shards — seconds per byte received for both.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/model_spec.h"

namespace shardgym::live {

struct BenchLiveOptions {
  ModelSpec model = bench_live_model();
  int threads = 1;  // intra-op threads of both sides
  int warmup = 3;
  int iters = 10;
  std::string python = "/usr/bin/python3";
  // "cpu" or "cuda": where both sides' single-rank step runs. On CUDA the ratio is the wall
  // clock's (a host thread waiting on the GPU burns CPU time that says nothing), the variants
  // (oneDNN products, CPU only) are skipped, and the repartition part stays on CPU ranks.
  std::string device = "cpu";
  std::string script;  // "" = runtime/live/bench/bench_live_eager.py of the source tree
  bool run_python = true;
  bool variants = true;  // also C++ on at::matmul and eager with oneDNN products
  int repartition_ranks = 4;
  std::string repartition_from = "uniform:tp1d(t=4)";
  std::string repartition_to = "uniform:tp2d(d1=2,d2=2,first=row)";

  static ModelSpec bench_live_model();  // 4 layers, h 128, 4 heads, seq 64, batch 8, fp32
};

struct BenchLiveResult {
  std::string workload;
  std::string device = "cpu";
  int threads = 1;
  std::vector<double> cpp_step_s, python_step_s;  // wall clock per step
  std::vector<double> cpp_cpu_s, python_cpu_s;    // process CPU time per step
  double cpp_median_s = 0, python_median_s = 0;
  double cpp_cpu_median_s = 0, python_cpu_median_s = 0;
  double ratio = 0;          // CPU time (CUDA: wall clock), cpp / python (0: Python did not run)
  double wall_ratio = 0;     // wall clock, cpp / python
  std::string python_error;  // why the Python side has no figure
  std::string python_torch;  // torch version reported by the script
  std::string cpp_gemm;      // what the C++ float32 products ran on: "onednn" or "matmul"
  // Variants (0 / empty when not run): medians of process CPU time per step.
  double cpp_matmul_cpu_median_s = 0;     // C++ with oneDNN off: at::matmul
  double python_onednn_cpu_median_s = 0;  // eager with oneDNN products
  double onednn_ratio = 0;                // CPU, cpp / python_onednn: both on oneDNN
  std::string python_onednn_error;
  std::string repartition_from, repartition_to;
  double repartition_bytes = 0, repartition_s = 0;  // bytes received over ranks, slowest rank
  double allgather_bytes = 0, allgather_s = 0;
  double repartition_s_per_byte() const {
    return repartition_bytes > 0 ? repartition_s / repartition_bytes : 0;
  }
  double allgather_s_per_byte() const {
    return allgather_bytes > 0 ? allgather_s / allgather_bytes : 0;
  }
};

BenchLiveResult bench_live(const BenchLiveOptions& options);
std::string bench_live_to_text(const BenchLiveResult& r);
std::string bench_live_to_json(const BenchLiveResult& r);

}  // namespace shardgym::live
