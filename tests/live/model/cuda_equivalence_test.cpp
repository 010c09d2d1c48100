// The tensor-parallel ranks on CUDA against the single-rank reference GPT on the CPU (label
// gpu; every test skips without a CUDA build and a visible GPU):
//   - one rank on the GPU (a thread): every catalog strategy and random mixtures, float64
//     (1e-9) and float32 (1e-5);
//   - Llama's blocks (grouped-query attention, SwiGLU, RMSNorm, rotary; tied and untied head);
//   - ranks sharing one GPU, P ∈ {2, 4}: processes (cuda_equivalence_worker.cpp) over Gloo,
//     which stages through the host — not threads: LibTorch's autograd engine runs every
//     backward of one device on one thread, so a rank thread waiting in a collective inside
//     its backward would block its peers' backward for good; the GPT, Llama's blocks and
//     pipelined plans (p = 2, 4 stages, m = 1, 2, 4, 1F1B and GPipe, TP inside stages);
//   - one rank per GPU over NCCL, P = 2 and 4 where that many GPUs are visible (NCCL refuses two
//     ranks on one GPU);
//   - the NCCL Comm itself on one GPU (groups of one rank through NCCL): every collective,
//     including the flat all-gather / reduce-scatter along a dim other than 0;
//   - training continues identically across repartitions on the GPU.
#include <mutex>
#include <string>
#include <tuple>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "runtime/live/comm/device.h"
#include "tests/live/cuda_skip.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/launch/process_ranks.h"
#include "runtime/live/tp/rank_trainer.h"
#include "tests/live/model/equivalence_util.h"
#ifdef SHARDGYM_WITH_CUDA
#include "runtime/live/comm/nccl.h"
#endif

namespace shardgym::live {
namespace {

using testing::kTimeout;
using testing::kTolDouble;
using testing::kTolFloat;
using testing::RunOn;

RunOn shared_gpu() { return {c10::Device(c10::kCUDA, 0), CommBackend::kGloo}; }

class SharedGpu : public ::testing::TestWithParam<int> {};

TEST_P(SharedGpu, EveryCatalogStrategyMatchesTheReferenceInFloat64) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  testing::expect_catalog_equivalent(GetParam(), at::kDouble, kTolDouble, shared_gpu());
}

TEST_P(SharedGpu, RandomMixturesMatchTheReferenceInFloat64) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  testing::expect_mixtures_equivalent(GetParam(), at::kDouble, kTolDouble, 8, 300 + GetParam(),
                                      shared_gpu());
}

TEST_P(SharedGpu, EveryCatalogStrategyMatchesTheReferenceInFloat32) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  testing::expect_catalog_equivalent(GetParam(), at::kFloat, kTolFloat, shared_gpu());
}

TEST_P(SharedGpu, LlamaBlocksMatchTheReferenceInFloat64) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  const ModelSpec m = testing::tiny_llama();
  testing::expect_equivalent(m, GetParam(), at::kDouble, kTolDouble,
                             testing::uniform_cases(m, GetParam()), shared_gpu());
  const ModelSpec tied = testing::tiny_llama(/*tied=*/true);
  testing::expect_equivalent(tied, GetParam(), at::kDouble, kTolDouble,
                             testing::mixture_cases(tied, GetParam(), 4, 600 + GetParam()),
                             shared_gpu());
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedGpu, ::testing::Values(1));

// (P, suite of cuda_equivalence_worker.cpp): the GPT's catalog and mixtures, Llama's blocks, and
// pipelined plans (stages on consecutive ranks, activations sent stage to stage).
class SharedGpuProcesses : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(SharedGpuProcesses, MatchTheReferenceInFloat64) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  const auto [ranks, suite] = GetParam();
  const auto results =
      run_processes(ranks, {SHARDGYM_CUDA_EQUIVALENCE_WORKER, "float64", suite}, 300);
  ASSERT_EQ(results.size(), size_t(ranks));
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ": " << r.output;
  const std::string& out = results[0].output;
  const size_t at = out.find("max loss_err");
  ASSERT_NE(at, std::string::npos) << out;
  std::printf("%s", out.substr(at).c_str());
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedGpuProcesses,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values("gpt", "llama", "pipelines")),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_P" +
                                  std::to_string(std::get<0>(info.param));
                         });

class NcclPerGpu : public ::testing::TestWithParam<int> {};

TEST_P(NcclPerGpu, EveryCatalogStrategyAndMixturesMatchTheReferenceInFloat64) {
  SHARDGYM_SKIP_WITHOUT_GPUS(GetParam());
  const RunOn on{c10::Device(c10::kCUDA, 0), CommBackend::kNccl};
  testing::expect_catalog_equivalent(GetParam(), at::kDouble, kTolDouble, on);
  testing::expect_mixtures_equivalent(GetParam(), at::kDouble, kTolDouble, 8, 400 + GetParam(),
                                      on);
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclPerGpu, ::testing::Values(2, 4));

#ifdef SHARDGYM_WITH_CUDA
// One rank, every group through NCCL: the collectives' plumbing (flat collectives along dim 1,
// CPU tensors staged to the device, the async all-reduce) on a single GPU.
TEST(NcclComm, EveryCollectiveOnOneGpu) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  auto store = c10::make_intrusive<c10d::HashStore>();
  NcclOptions o;
  o.timeout_s = 60;
  o.nccl_singletons = true;
  NcclCommWorld w(store, 0, 1, o);
  Comm& c = w.world();
  const at::Tensor x = at::arange(24, at::TensorOptions().dtype(at::kDouble).device(at::kCUDA))
                           .reshape({2, 3, 4});
  at::Tensor y = x.clone();
  c.all_reduce(y);
  EXPECT_TRUE(at::equal(y, x));
  auto work = c.all_reduce_async(y);
  work->wait();
  EXPECT_TRUE(work->completed());
  EXPECT_TRUE(at::equal(y, x));
  for (int64_t dim : {0, 1, 2}) {
    EXPECT_TRUE(at::equal(c.all_gather(x, dim), x)) << "all_gather dim " << dim;
    EXPECT_TRUE(at::equal(c.reduce_scatter(x, dim), x)) << "reduce_scatter dim " << dim;
  }
  at::Tensor nc = x.transpose(0, 2);  // not contiguous: written back in place
  c.all_reduce(nc);
  EXPECT_TRUE(at::equal(nc, x.transpose(0, 2)));
  at::Tensor host = at::ones({5}, at::kFloat);  // staged through the device and back
  c.all_reduce(host);
  EXPECT_TRUE(host.device().is_cpu());
  EXPECT_TRUE(at::equal(host, at::ones({5}, at::kFloat)));
  c.broadcast(y, 0);
  c.barrier();
  EXPECT_GE(c.stats().calls, 10);
  EXPECT_GT(c.stats().bytes, -1.0);
  EXPECT_EQ(c.stats().async_calls, 1);
}
#endif

// Ten float64 iterations on the GPU with plan changes at 3 and 6 give the losses of ten
// iterations that never change, and the parameters stay on the GPU.
TEST(SharedGpuTraining, RepartitionKeepsTheLossesOfAStaticRun) {
  SHARDGYM_SKIP_WITHOUT_GPUS(1);
  const ModelSpec m = testing::tiny_model();
  const ParamMap init = testing::perturbed_params(m, at::kDouble, 21);
  const int B = m.num_blocks();
  // One rank: the moves change only chunking and recomputation (the placement of a world of
  // one cannot change); the multi-rank repartitions on a GPU run in live_cuda_test (processes).
  const Plan p0 = Plan::parse("uniform:dp", B);
  const Plan p1 = Plan::parse("uniform:tp1d(t=1,chunks=2)", B);
  const Plan p2 = Plan::parse("uniform:dp(recompute=1)", B);
  std::vector<double> fixed(10), moved(10);
  std::mutex mu;
  bool on_gpu = true;
  run_threads(1, [&](CommWorld& w) {
    TrainerOptions o;
    o.dtype = at::kDouble;
    o.device = c10::Device(c10::kCUDA, 0);
    RankTrainer a(m, p0, w, o), b(m, p0, w, o);
    a.load_full_params(init);
    b.load_full_params(init);
    // One batch: the loss must fall.
    const auto batch = testing::random_batch(m, m.global_batch, 100);
    for (int i = 0; i < 10; ++i) {
      if (i == 3) b.repartition(p1);
      if (i == 6) b.repartition(p2);
      const double la = a.train_step(batch.tokens, batch.targets);
      const double lb = b.train_step(batch.tokens, batch.targets);
      std::lock_guard<std::mutex> lock(mu);
      if (w.rank() == 0) {
        fixed[i] = la;
        moved[i] = lb;
      }
      for (const auto& [name, t] : b.local_params()) on_gpu = on_gpu && t.is_cuda();
    }
  }, kTimeout);
  EXPECT_TRUE(on_gpu);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(moved[i], fixed[i], 1e-9 * std::abs(fixed[i])) << "iteration " << i;
  }
  EXPECT_LT(fixed[9], fixed[0]);
}

}  // namespace
}  // namespace shardgym::live
