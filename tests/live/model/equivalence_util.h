// Shared by the equivalence tests (CPU: equivalence_test.cpp, CUDA: cuda_equivalence_test.cpp):
// plans to check and the comparison of P ranks' loss and gathered gradients with the
// single-rank reference GPT from the same initial weights.
//
// Length: one header both test binaries include (the CUDA one is built apart), holding the
// plan lists and the comparison they must share to check the same thing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/rank_trainer.h"
#include "runtime/live/tp/reference_gpt.h"
#include "tests/live/model/model_test_util.h"

namespace shardgym::live::testing {

constexpr double kTimeout = 120;
// float64: the partitioned sums differ from the reference only in summation order, ~1e-15
// relative per operation; 1e-9 leaves room for the depth of the network and nothing more.
constexpr double kTolDouble = 1e-9;
// float32: ~1e-7 per operation, accumulated over two layers and the loss.
constexpr double kTolFloat = 1e-5;

struct Case {
  std::string name;
  Plan plan;
  int micro_batches = 1;  // gradient accumulation over this many micro-batches
};

struct Outcome {
  double loss_err = 0, grad_err = 0;
  std::string worst;
};

inline std::vector<Case> uniform_cases(const ModelSpec& m, int world) {
  StrategyCatalog cat(m, world);
  std::vector<Case> out;
  for (int i = 0; i < cat.size(); ++i)
    if (cat.shape_mask(BlockKind::kAttention)[i] && cat.shape_mask(BlockKind::kMlp)[i])
      out.push_back({"uniform:" + cat.at(i).to_string(), Plan::uniform(cat.at(i), m.num_blocks())});
  return out;
}

// ATP meshes with one axis of size 1 (outside the catalog): d2 = 1 is Megatron 1D, d1 = 1
// splits only the hidden dimension.
inline std::vector<Case> degenerate_mesh_cases(const ModelSpec& m, int world) {
  std::vector<Case> out;
  for (int t = 2; t <= world; t *= 2)
    for (const char* first : {"row", "col"})
      for (auto [d1, d2] : {std::pair<int, int>{t, 1}, {1, t}}) {
        const std::string s = "tp2d(d1=" + std::to_string(d1) + ",d2=" + std::to_string(d2) +
                              ",first=" + first + ")";
        out.push_back({"uniform:" + s, Plan::parse("uniform:" + s, m.num_blocks())});
      }
  return out;
}

// `cases` run as m micro-batches, those whose split the batch allows: m divides each rank's
// G/P rows and every block's chunks divide its rows per micro-batch and replica. Counted here
// from the batch arithmetic, not by the runtime's check, so that a check that refused too
// much would show as missing cases (see covered_kinds).
inline std::vector<Case> with_micro_batches(const std::vector<Case>& cases, int m, int world,
                                            int64_t global_batch) {
  std::vector<Case> out;
  for (Case c : cases) {
    bool fits = (global_batch / world) % m == 0;
    for (const Strategy& s : c.plan.blocks)
      fits = fits && (global_batch / s.replicas(world) / m) % s.chunks == 0;
    if (!fits) continue;
    c.name += " m=" + std::to_string(m);
    c.micro_batches = m;
    out.push_back(c);
  }
  return out;
}

// tiny_model (or `m`) with 4 layers (8 blocks), so that 4 pipeline stages hold a layer each.
inline ModelSpec four_layers(ModelSpec m = tiny_model()) {
  m.layers = 4;
  return m;
}

// `blocks` (a plan's block part) under every pipeline part of `parts` ("pp(p=2)", ...), each
// with m ∈ {1, 2, 4} micro-batches.
inline std::vector<Case> pipelined_cases(const ModelSpec& m, const std::string& blocks,
                                         const std::vector<std::string>& parts) {
  std::vector<Case> out;
  for (const std::string& part : parts)
    for (int mb : {1, 2, 4}) {
      Case c;
      c.plan = Plan::parse(blocks + "@" + part, m.num_blocks());
      c.micro_batches = mb;
      c.name = c.plan.to_string() + " m=" + std::to_string(mb);
      out.push_back(c);
    }
  return out;
}

// The strategy kinds that some block of `cases` uses: dp, tp1d, sp, tp2d-row, tp2d-col,
// chunks, recompute.
inline std::set<std::string> covered_kinds(const std::vector<Case>& cases) {
  std::set<std::string> k;
  for (const Case& c : cases)
    for (const Strategy& s : c.plan.blocks) {
      if (s.kind == StrategyKind::kDP) k.insert("dp");
      if (s.kind == StrategyKind::kTP1D) k.insert(s.sp ? "sp" : "tp1d");
      if (s.kind == StrategyKind::kTP2D) k.insert(s.row_first ? "tp2d-row" : "tp2d-col");
      if (s.chunks > 1) k.insert("chunks");
      if (s.recompute) k.insert("recompute");
    }
  return k;
}

inline std::vector<Case> mixture_cases(const ModelSpec& m, int world, int n, uint32_t seed) {
  StrategyCatalog cat(m, world);
  std::mt19937 rng(seed);
  std::vector<Case> out;
  for (int k = 0; k < n; ++k) {
    Plan plan;
    for (int b = 0; b < m.num_blocks(); ++b) {
      const auto& mask = cat.shape_mask(ModelSpec::block_kind(b));
      std::vector<int> valid;
      for (int i = 0; i < cat.size(); ++i)
        if (mask[i]) valid.push_back(i);
      plan.blocks.push_back(cat.at(valid[rng() % valid.size()]));
    }
    out.push_back({"mixture:" + plan.to_string(), plan});
  }
  return out;
}

// Where the ranks run: the CPU, or CUDA device `device` for every rank (ranks as threads; Gloo
// stages through the host) and, with NCCL, rank r on GPU r.
struct RunOn {
  c10::Device device = c10::Device(c10::kCPU);
  CommBackend backend = CommBackend::kGloo;
  bool stage_copies = false;  // Gloo: collectives on copies, written back (GlooOptions)
};

// The single-rank reference of every case: initial weights (in the ranks' dtype), one batch,
// and the reference loss and gradients (float64, CPU).
struct Reference {
  ParamMap init;
  Batch batch;
  ParamMap grads;
  double loss = 0;
};

inline Reference make_reference(const ModelSpec& m, at::ScalarType dtype) {
  Reference r;
  r.init = perturbed_params(m, dtype, 11);
  r.batch = random_batch(m, m.global_batch, 12);
  ReferenceGpt ref(m, perturbed_params(m, at::kDouble, 11));
  at::Tensor loss = ref.loss(r.batch.tokens, r.batch.targets);
  loss.backward();
  r.grads = ref.grads();
  r.loss = loss.item<double>();
  return r;
}

// Collective: one case on this rank's world; relative errors of the loss and of the gathered
// gradients (moved to the CPU) against the reference. `on_device`: every local shard of the
// trainer lives on `o.device`'s kind of device.
inline Outcome evaluate_case(const ModelSpec& m, const Case& c, CommWorld& w,
                             const TrainerOptions& o, const Reference& ref,
                             bool* on_device = nullptr) {
  RankTrainer tr(m, c.plan, w, o);
  tr.load_full_params(ref.init);
  const double loss =
      tr.forward_backward(ref.batch.tokens, ref.batch.targets, nullptr, c.micro_batches);
  ParamMap grads = tr.gather_full_grads();
  if (on_device) {
    *on_device = true;
    for (const auto& kv : tr.local_params())
      *on_device = *on_device && kv.second.device().type() == o.device.type();
  }
  for (auto& kv : grads) kv.second = kv.second.cpu();
  Outcome got;
  got.loss_err = std::abs(loss - ref.loss) / std::abs(ref.loss);
  got.grad_err = max_rel_err(grads, ref.grads, &got.worst);
  return got;
}

inline std::vector<Outcome> run_cases(const ModelSpec& m, int world, at::ScalarType dtype,
                                      const std::vector<Case>& cases, const RunOn& on = {}) {
  const Reference ref = make_reference(m, dtype);
  std::vector<Outcome> out(cases.size());
  std::mutex mu;
  WorldOptions wo;
  wo.backend = on.backend;
  wo.timeout_s = kTimeout;
  wo.stage_copies = on.stage_copies;
  run_threads(world, [&](CommWorld& w) {
    TrainerOptions o;
    o.dtype = dtype;
    o.device = on.device.is_cuda() && on.backend == CommBackend::kNccl
                   ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(w.rank()))
                   : on.device;
    for (size_t c = 0; c < cases.size(); ++c) {
      const Outcome got = evaluate_case(m, cases[c], w, o, ref);
      std::lock_guard<std::mutex> lock(mu);
      if (got.loss_err > out[c].loss_err) out[c].loss_err = got.loss_err;
      if (got.grad_err >= out[c].grad_err) out[c] = Outcome{out[c].loss_err, got.grad_err, got.worst};
    }
  }, wo);
  return out;
}

inline void expect_equivalent(const ModelSpec& m, int world, at::ScalarType dtype, double tol,
                              const std::vector<Case>& cases, const RunOn& on = {}) {
  const auto out = run_cases(m, world, dtype, cases, on);
  double loss_max = 0, grad_max = 0;
  for (const auto& o : out) {
    loss_max = std::max(loss_max, o.loss_err);
    grad_max = std::max(grad_max, o.grad_err);
  }
  std::printf("%s P=%d %s: %zu plans, max relative error: loss %.2e, gradients %.2e\n",
              on.device.str().c_str(), world,
              dtype == at::kDouble ? "float64" : "float32", cases.size(), loss_max, grad_max);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_LE(out[c].loss_err, tol) << "P=" << world << " " << cases[c].name << ": loss";
    EXPECT_LE(out[c].grad_err, tol) << "P=" << world << " " << cases[c].name << ": gradient of "
                                    << out[c].worst;
  }
}

// The tiny GPT on `world` ranks under every catalog strategy.
inline void expect_catalog_equivalent(int world, at::ScalarType dtype, double tol,
                                      const RunOn& on = {}) {
  const ModelSpec m = tiny_model();
  expect_equivalent(m, world, dtype, tol, uniform_cases(m, world), on);
}

// The tiny GPT on `world` ranks under n random per-block mixtures drawn from `seed`.
inline void expect_mixtures_equivalent(int world, at::ScalarType dtype, double tol, int n,
                                       uint32_t seed, const RunOn& on = {}) {
  const ModelSpec m = tiny_model();
  expect_equivalent(m, world, dtype, tol, mixture_cases(m, world, n, seed), on);
}

// The single-rank reference trainer's losses over `batches` from `init`, with the AdamW
// options and clipping the ranks train with (`o`): what training through repartitions must give.
inline std::vector<double> reference_losses(const ModelSpec& m, const ParamMap& init,
                                            const TrainerOptions& o,
                                            const std::vector<Batch>& batches) {
  ReferenceTrainer ref(m, init, AdamWOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay},
                       o.clip);
  std::vector<double> out;
  for (const Batch& b : batches) out.push_back(ref.train_step(b.tokens, b.targets));
  return out;
}

// What the tests that train through repartitions check against: AdamW in float64 (lr 1e-2,
// clipping at 0.5, below these models' gradient norms, so that clipping is active), perturbed
// initial weights from `param_seed`, `iters` batches from `batch_seed` on, and the reference
// trainer's losses over them.
struct TrainingReference {
  TrainerOptions options;
  ParamMap init;
  std::vector<Batch> batches;
  std::vector<double> losses;
};

inline TrainingReference training_reference(const ModelSpec& m, int iters, uint64_t param_seed,
                                            uint64_t batch_seed) {
  TrainingReference r;
  r.options.dtype = at::kDouble;
  r.options.lr = 1e-2;
  r.options.clip = 0.5;
  r.init = perturbed_params(m, at::kDouble, param_seed);
  for (int i = 0; i < iters; ++i)
    r.batches.push_back(random_batch(m, m.global_batch, batch_seed + i));
  r.losses = reference_losses(m, r.init, r.options, r.batches);
  return r;
}

// What `tr.train_step` over `b` in `micro_batches` refuses with (std::invalid_argument's
// message), or "" when it trains.
inline std::string train_step_error(RankTrainer& tr, const Batch& b, int micro_batches) {
  try {
    tr.train_step(b.tokens, b.targets, nullptr, micro_batches);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// Repartitions while training: (iteration, plan) pairs, each moved to before its iteration.
using Moves = std::vector<std::pair<int, Plan>>;

// Every rank of `world` thread-ranks trains `ref.batches` from `ref.init` under `p0`, moving to
// each plan of `moves` before its iteration, one AdamW step per batch; `on_move(tr, rank, iter,
// stats)` sees every repartition on its rank's thread. Each rank's losses, in order.
template <class OnMove>
std::vector<std::vector<double>> train_through_moves(const ModelSpec& m, int world, const Plan& p0,
                                                     const Moves& moves,
                                                     const TrainingReference& ref,
                                                     OnMove on_move) {
  std::mutex mu;
  std::vector<std::vector<double>> losses(world);
  run_threads(world, [&](CommWorld& w) {
    RankTrainer tr(m, p0, w, ref.options);
    tr.load_full_params(ref.init);
    std::vector<double> l;
    for (int i = 0; i < static_cast<int>(ref.batches.size()); ++i) {
      for (const auto& [at_iter, p] : moves)
        if (at_iter == i) on_move(tr, w.rank(), i, tr.repartition(p));
      l.push_back(tr.train_step(ref.batches[i].tokens, ref.batches[i].targets));
    }
    EXPECT_EQ(tr.optimizer_step_count(), static_cast<int64_t>(ref.batches.size()))
        << "rank " << w.rank();
    std::lock_guard<std::mutex> lock(mu);
    losses[w.rank()] = l;
  }, kTimeout);
  return losses;
}

// Rank `rank`'s training losses, step by step, against the reference trainer's `want`.
inline void expect_reference_losses(const std::vector<double>& got,
                                    const std::vector<double>& want, int rank) {
  ASSERT_EQ(got.size(), want.size()) << "rank " << rank;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], kTolDouble * want[i]) << "rank " << rank << " iter " << i;
}

}  // namespace shardgym::live::testing
