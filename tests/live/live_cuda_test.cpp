// LiveRun on CUDA (label gpu; skips without a CUDA build and a GPU): the env-facing run with
// its ranks' tensors on the GPU — ranks sharing one GPU over Gloo, and one rank per GPU over
// NCCL, as threads and as processes; pipeline stages on rank processes sharing one GPU.
#include "runtime/live/driver/live_run.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/live/comm/device.h"
#include "tests/live/cuda_skip.h"
#include "tests/live/live_test_spec.h"

namespace shardgym::live {
namespace {

// Trains `steps` iterations, moving between two plans, and checks what every step reports.
void train_and_check(LiveRun& run, const Plan& a, const Plan& b, int steps) {
  run.reset(3, a);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    const Plan& p = (i % 4 == 2) ? b : a;
    const bool moves = p != run.plan();
    const Measurement m = run.step(p);
    ASSERT_TRUE(m.ok) << m.error;
    EXPECT_EQ(m.memory_source, "cuda-allocator");
    EXPECT_GT(m.step_latency_s, 0);
    for (double peak : m.peak_memory_bytes) EXPECT_GT(peak, 0);
    for (double f : m.block_fwd_s) EXPECT_GT(f, 0);
    // A world of one holds every block whole: a move changes execution, not placement.
    if (moves && run.rank_config().world_size > 1) {
      EXPECT_GT(m.repartition_bytes, 0) << "step " << i;
    }
    losses.push_back(m.loss);
  }
  EXPECT_NEAR(losses.front(), std::log(256.0), 0.3);
  EXPECT_LT(losses.back(), losses.front() - 0.5);
  EXPECT_TRUE(std::isfinite(run.eval_loss(0)));
}

// Ranks sharing a GPU are processes (threads would share its one autograd backward thread).
TEST(LiveCuda, FourRankProcessesShareOneGpuOverGloo) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  ExperimentSpec spec = tiny_live_spec(4, "processes");
  spec.live.device = "cuda";
  spec.live.backend = "gloo";
  spec.live.timeout_s = 60;
  LiveRun run(spec);
  const int blocks = run.model().num_blocks();
  train_and_check(run, Plan::uniform(Strategy::tp1d(2), blocks),
                  Plan::parse("tp1d(t=4);dp;tp2d(d1=2,d2=2,first=row);tp1d(t=2,sp=1)", blocks),
                  12);
}

// Pipeline stages on rank processes sharing cuda:0 over Gloo: two stages of two tensor-parallel
// ranks, a boundary move and a change of schedule, every loss that of the same blocks on one
// stage (float64), and peak memory from the CUDA allocator on every rank.
TEST(LiveCuda, PipelineStagesOnRankProcessesSharingOneGpu) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  ExperimentSpec spec = tiny_live_spec(4, "processes");
  spec.live.device = "cuda";
  spec.live.backend = "gloo";
  spec.live.precision = "float64";
  spec.live.timeout_s = 60;
  spec.model.layers = 4;
  const std::string one = "uniform:tp1d(t=2)@pp(m=2)";
  const std::vector<Measurement> g = expect_losses_of_one_stage(
      spec,
      two_stage_plans("uniform:tp1d(t=2)@pp(p=2,m=2,split=3/1,schedule=gpipe)"),
      {one, one, one});
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].memory_source, "cuda-allocator");
    ASSERT_EQ(g[i].peak_memory_bytes.size(), 4u);
    for (double peak : g[i].peak_memory_bytes) EXPECT_GT(peak, 0);
    if (i == 1) {
      EXPECT_GT(g[i].repartition_bytes, 0);  // the boundary moved a layer
    }
  }
}

// One rank per GPU (two where there are two GPUs), NCCL being live.backend's default on cuda.
void one_rank_per_gpu_over_nccl(const std::string& launch) {
  const int p = cuda_device_count() >= 2 ? 2 : 1;
  ExperimentSpec spec = tiny_live_spec(p, launch);
  spec.live.device = "cuda";
  if (launch == "processes") spec.live.timeout_s = 60;
  LiveRun run(spec);
  ASSERT_EQ(run.rank_config().backend, "nccl");
  const int blocks = run.model().num_blocks();
  train_and_check(run, Plan::uniform(Strategy::dp(), blocks),
                  Plan::uniform(Strategy::tp1d(p), blocks), 12);
}

TEST(LiveCuda, OneRankPerGpuOverNcclAsThreads) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  one_rank_per_gpu_over_nccl("threads");
}

TEST(LiveCuda, OneRankPerGpuOverNcclAsProcesses) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  one_rank_per_gpu_over_nccl("processes");
}

// Why LiveRun refuses one more rank thread than there are GPUs on `backend`; "" if it accepts.
std::string refusal_of_a_rank_thread_too_many(const std::string& backend) {
  ExperimentSpec spec = tiny_live_spec(cuda_device_count() + 1, "threads");
  spec.live.device = "cuda";
  spec.live.backend = backend;
  try {
    LiveRun run(spec);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(LiveCuda, RankThreadsSharingAGpuAreRejectedBeforeAnyRankStarts) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  const std::string why = refusal_of_a_rank_thread_too_many("gloo");
  EXPECT_NE(why.find("use launch: processes"), std::string::npos)
      << "rank threads sharing a GPU: " << why;
}

TEST(LiveCuda, NcclWithMoreRanksThanGpusIsRejectedBeforeAnyRankStarts) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  const std::string why = refusal_of_a_rank_thread_too_many("nccl");
  EXPECT_NE(why.find("NCCL refuses two ranks on one GPU"), std::string::npos)
      << cuda_device_count() + 1 << " NCCL ranks on " << cuda_device_count() << " GPU(s): "
      << why;
}

}  // namespace
}  // namespace shardgym::live
