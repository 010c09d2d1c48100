// `shardgym bench live` end to end on a tiny model: both sides produce step times, the
// repartition and the all-gather move bytes, the reports carry the figures.
#include "runtime/live/bench/bench_live.h"
#include "runtime/live/bench/bench_pipeline.h"

#include <gtest/gtest.h>

namespace shardgym::live {
namespace {

// Options of either bench on a model of `layers` layers, `hidden` and `seq`, timing `iters`
// steps after `warmup`.
template <class Options>
Options tiny_bench(int layers, int hidden, int seq, int warmup, int iters) {
  Options o;
  o.model.layers = layers;
  o.model.hidden = hidden;
  o.model.seq = seq;
  o.warmup = warmup;
  o.iters = iters;
  return o;
}

TEST(BenchLive, TimesBothSidesAndTheRepartition) {
  BenchLiveOptions o = tiny_bench<BenchLiveOptions>(2, 32, 16, 1, 3);
  const BenchLiveResult r = bench_live(o);
  ASSERT_EQ(r.cpp_step_s.size(), 3u);
  EXPECT_GT(r.cpp_median_s, 0);
  ASSERT_TRUE(r.python_error.empty()) << r.python_error;
  ASSERT_EQ(r.python_step_s.size(), 3u);
  EXPECT_GT(r.python_median_s, 0);
  ASSERT_EQ(r.python_cpu_s.size(), 3u);
  EXPECT_GT(r.cpp_cpu_median_s, 0);
  EXPECT_DOUBLE_EQ(r.ratio, r.cpp_cpu_median_s / r.python_cpu_median_s);
  EXPECT_DOUBLE_EQ(r.wall_ratio, r.cpp_median_s / r.python_median_s);
  EXPECT_FALSE(r.python_torch.empty());
  // Variants: where the C++ side runs its float32 products on oneDNN, it is also timed on
  // at::matmul, and eager is also timed with the same oneDNN products.
  ASSERT_TRUE(r.cpp_gemm == "onednn" || r.cpp_gemm == "matmul") << r.cpp_gemm;
  if (r.cpp_gemm == "onednn") {
    EXPECT_GT(r.cpp_matmul_cpu_median_s, 0);
    ASSERT_TRUE(r.python_onednn_error.empty()) << r.python_onednn_error;
    EXPECT_GT(r.python_onednn_cpu_median_s, 0);
    EXPECT_DOUBLE_EQ(r.onednn_ratio, r.cpp_cpu_median_s / r.python_onednn_cpu_median_s);
    EXPECT_NE(bench_live_to_text(r).find("eager with oneDNN products"), std::string::npos);
  }
  EXPECT_GT(r.repartition_bytes, 0);
  EXPECT_GT(r.repartition_s, 0);
  // tp1d(t=4) -> tp2d(2x2): each rank already holds part of what it needs, so a repartition
  // receives less than all-gathering every shard.
  EXPECT_LT(r.repartition_bytes, r.allgather_bytes);
  const std::string text = bench_live_to_text(r);
  EXPECT_NE(text.find("ratio C++/Python: CPU"), std::string::npos) << text;
  const std::string json = bench_live_to_json(r);
  EXPECT_NE(json.find("\"ratio\": "), std::string::npos) << json;
  EXPECT_NE(json.find("\"repartition_bytes\": "), std::string::npos) << json;
}

TEST(BenchLive, AMissingInterpreterIsReportedNotFatal) {
  BenchLiveOptions o = tiny_bench<BenchLiveOptions>(1, 16, 8, 0, 1);
  o.python = "/nonexistent/python3";
  o.repartition_ranks = 1;
  const BenchLiveResult r = bench_live(o);
  EXPECT_FALSE(r.python_error.empty());
  EXPECT_EQ(r.ratio, 0);
  EXPECT_NE(bench_live_to_text(r).find("no figure"), std::string::npos);
}

// `shardgym bench pipeline` on a tiny model: every (schedule, m) row has a step, a stage's
// compute, a bubble in (0, 1) and the formula's; the eager side runs the same pipeline.
TEST(BenchPipeline, MeasuresTheBubbleOnBothSides) {
  BenchPipelineOptions o = tiny_bench<BenchPipelineOptions>(2, 32, 16, 1, 2);
  o.micro_batches = {1, 4};
  const BenchPipelineResult r = bench_pipeline(o);
  ASSERT_EQ(r.rows.size(), 4u);
  ASSERT_TRUE(r.python_error.empty()) << r.python_error;
  for (const BenchPipelineRow& w : r.rows) {
    EXPECT_GT(w.step_s, 0);
    EXPECT_GT(w.stage_compute_s, 0);
    EXPECT_GT(w.bubble, 0);
    EXPECT_LT(w.bubble, 1);
    EXPECT_DOUBLE_EQ(w.formula, 1.0 / (w.micro_batches + 1));
    EXPECT_GT(w.eager_step_s, 0);
  }
  EXPECT_NE(bench_pipeline_to_json(r).find("\"eager_step_s\": "), std::string::npos);
  o.ranks = 3;  // more stages than layers
  EXPECT_THROW(bench_pipeline(o), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym::live
