// Repartitioning while training: moving blocks (parameters and AdamW state) to new strategies
// at iterations 3 and 6 leaves the 10 training losses those of never repartitioning — and of
// the single-rank reference trainer, also with 2 micro-batches per iteration — and each rank
// receives exactly the elements it lacks.
#include <chrono>
#include <mutex>
#include <random>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/rank_trainer.h"
#include "runtime/live/tp/reference_gpt.h"
#include "tests/live/model/model_test_util.h"

namespace shardgym::live {
namespace {

using testing::perturbed_params;
using testing::random_batch;
using testing::tiny_model;

constexpr double kTimeout = 120;
// float64 over 10 AdamW steps: orders of summation differ between strategies (~1e-15 per op);
// Adam's normalisation keeps relative errors at that scale. 1e-9 as the issue asks.
constexpr double kTol = 1e-9;

TrainerOptions options() {
  TrainerOptions o;
  o.dtype = at::kDouble;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.clip = 0.5;  // below the gradient norm of this model: clipping is active
  return o;
}

// `micro_batches` > 1: every iteration runs as that many micro-batches with gradient
// accumulation, against the reference's whole-batch steps (one AdamW step per iteration).
void expect_training_matches(int micro_batches, const ModelSpec& m = tiny_model()) {
  const int world = 4, iters = 10;
  const Plan p0 = Plan::parse("dp;tp1d(t=2);tp2d(d1=2,d2=2,first=row);tp1d(t=4,sp=1)", 4);
  const Plan p1 = Plan::parse(
      "tp1d(t=4,chunks=2);tp2d(d1=2,d2=2,first=col);dp;tp1d(t=2,sp=1,recompute=1)", 4);
  const Plan p2 = Plan::parse(
      "tp2d(d1=2,d2=2,first=row,recompute=1);dp;tp1d(t=4,sp=1);tp2d(d1=2,d2=2,first=col)", 4);
  ASSERT_EQ(p0.validate(m, world), "");
  ASSERT_EQ(p1.validate(m, world), "");
  ASSERT_EQ(p2.validate(m, world), "");
  const ParamMap init = perturbed_params(m, at::kDouble, 21);
  std::vector<testing::Batch> batches;
  for (int i = 0; i < iters; ++i) batches.push_back(random_batch(m, m.global_batch, 300 + i));

  ReferenceTrainer ref(m, init, AdamWOptions{options().lr, 0.9, 0.999, 1e-8, options().weight_decay},
                       options().clip);
  std::vector<double> ref_losses;
  for (const auto& b : batches) ref_losses.push_back(ref.train_step(b.tokens, b.targets));

  std::mutex mu;
  std::vector<std::vector<double>> fixed(world), moved(world);
  std::vector<double> bytes(world, 0);
  bool state_moved_exactly = true;
  double final_param_err = 0;
  int64_t steps = -1;
  run_threads(world, [&](CommWorld& w) {
    RankTrainer a(m, p0, w, options()), b(m, p0, w, options());
    a.load_full_params(init);
    b.load_full_params(init);
    std::vector<double> la, lb;
    double received = 0;
    bool exact = true;
    for (int i = 0; i < iters; ++i) {
      if (i == 3 || i == 6) {
        received += b.repartition(i == 3 ? p1 : p2).bytes_received;
        for (const char* which : {"exp_avg", "exp_avg_sq"}) {
          const auto sa = a.gather_full_optimizer_state(which);
          const auto sb = b.gather_full_optimizer_state(which);
          for (const auto& [name, t] : sa) exact = exact && (i != 3 || at::equal(t, sb.at(name)));
        }
        exact = exact && a.optimizer_step_count() == b.optimizer_step_count();
      }
      la.push_back(a.train_step(batches[i].tokens, batches[i].targets, nullptr, micro_batches));
      lb.push_back(b.train_step(batches[i].tokens, batches[i].targets, nullptr, micro_batches));
    }
    std::string worst;
    const double perr = testing::max_rel_err(b.gather_full_params(), ref.gpt().params(), &worst);
    std::lock_guard<std::mutex> lock(mu);
    fixed[w.rank()] = la;
    moved[w.rank()] = lb;
    bytes[w.rank()] = received;
    state_moved_exactly = state_moved_exactly && exact;
    final_param_err = std::max(final_param_err, perr);
    steps = b.optimizer_step_count();
  }, kTimeout);
  EXPECT_EQ(steps, iters) << "one optimizer step per iteration";

  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(moved[r].size(), size_t(iters));
    for (int i = 0; i < iters; ++i) {
      EXPECT_NEAR(moved[r][i], fixed[r][i], kTol * fixed[r][i]) << "rank " << r << " iter " << i;
      EXPECT_NEAR(moved[r][i], ref_losses[i], kTol * ref_losses[i]) << "rank " << r << " iter " << i;
    }
    EXPECT_GT(bytes[r], 0) << "rank " << r << " should have received something";
  }
  // Moments are copied, not recomputed: identical bits right after the first repartition.
  EXPECT_TRUE(state_moved_exactly);
  EXPECT_LT(final_param_err, kTol);
}

TEST(Repartition, TrainingLossesMatchNeverRepartitioningAndTheReference) {
  expect_training_matches(1);
}

// Global batch 8 on 4 ranks: 2 micro-batches of one row per rank; p1's chunks=2 block
// (tp1d(t=4), one replica) still gets 4 rows per micro-batch.
TEST(Repartition, WithTwoMicroBatchesPerIterationTrainingStillMatchesTheReference) {
  expect_training_matches(2);
}

// Parameters whose value is their flat index: a rank's holdings are the set of values it has,
// before and after. Expected bytes = |after \ before| per tensor × 3 (param, exp_avg,
// exp_avg_sq) × 8 bytes; computed from values, independently of the layout arithmetic.
ParamMap index_params(const ModelSpec& m) {
  ParamMap p = init_gpt_params(m, at::kDouble, 0);
  for (auto& [name, t] : p) t = at::arange(t.numel(), at::kDouble).view(t.sizes());
  return p;
}

void expect_exact_byte_counts(int world, int pairs, uint32_t seed,
                              const ModelSpec& m = tiny_model()) {
  StrategyCatalog cat(m, world);
  std::mt19937 rng(seed);
  auto random_plan = [&] {
    Plan plan;
    for (int b = 0; b < m.num_blocks(); ++b) {
      std::vector<int> valid;
      for (int i = 0; i < cat.size(); ++i)
        if (cat.shape_mask(ModelSpec::block_kind(b))[i]) valid.push_back(i);
      plan.blocks.push_back(cat.at(valid[rng() % valid.size()]));
    }
    return plan;
  };
  std::vector<std::pair<Plan, Plan>> moves;
  for (int k = 0; k < pairs; ++k) moves.push_back({random_plan(), random_plan()});
  const ParamMap idx = index_params(m);
  std::mutex mu;
  std::vector<std::string> failures;
  double total = 0;
  run_threads(world, [&](CommWorld& w) {
    for (const auto& [from, to] : moves) {
      RankTrainer tr(m, from, w, options());
      tr.load_full_params(idx);
      const auto before = tr.local_params();
      const RepartitionStats st = tr.repartition(to);
      const auto after = tr.local_params();
      double lacking = 0;
      for (const auto& [name, t] : after)
        lacking += (~at::isin(t.flatten(), before.at(name).flatten())).sum().item<double>();
      const double expected = lacking * 3 * sizeof(double);
      bool values_ok = true;
      for (const auto& [name, t] : tr.gather_full_params()) values_ok = values_ok && at::equal(t, idx.at(name));
      std::lock_guard<std::mutex> lock(mu);
      total += st.bytes_received;
      const std::string what = from.to_string() + " -> " + to.to_string() + " on rank " +
                               std::to_string(w.rank());
      if (st.bytes_received != expected)
        failures.push_back(what + ": received " + std::to_string(st.bytes_received) +
                           " bytes, lacking " + std::to_string(expected));
      if (!values_ok) failures.push_back(what + ": parameters changed in the move");
    }
  }, kTimeout);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();
  EXPECT_GT(total, 0);
}

TEST(Repartition, ReceivesExactlyWhatTheNewLayoutLacksOnTwoRanks) { expect_exact_byte_counts(2, 6, 7); }
TEST(Repartition, ReceivesExactlyWhatTheNewLayoutLacksOnFourRanks) { expect_exact_byte_counts(4, 12, 8); }

// Llama's blocks (grouped-query attention, SwiGLU's interleaved gate/up columns, RMSNorm
// weights, no biases; the LM head tied to wte) move between the same strategies: the boxes of
// whole query groups and of gate/up pairs carry parameters and moments to where each layout
// computes with them, and training matches the reference.
TEST(Repartition, LlamaTrainingMatchesTheReference) {
  expect_training_matches(1, testing::tiny_llama(/*tied=*/true));
  expect_training_matches(2, testing::tiny_llama());
}

TEST(Repartition, LlamaReceivesExactlyWhatTheNewLayoutLacks) {
  expect_exact_byte_counts(4, 8, 9, testing::tiny_llama());
}

TEST(Repartition, ChangingOnlyChunksOrRecomputeMovesNothing) {
  const ModelSpec m = tiny_model();
  const Plan from = Plan::parse("uniform:tp1d(t=2)", 4);
  const Plan to = Plan::parse("uniform:tp1d(t=2,sp=1,chunks=2,recompute=1)", 4);
  std::mutex mu;
  double bytes = -1;
  int changed = 0;
  run_threads(2, [&](CommWorld& w) {
    RankTrainer tr(m, from, w, options());
    const RepartitionStats st = tr.repartition(to);
    std::lock_guard<std::mutex> lock(mu);
    bytes = std::max(bytes, st.bytes_received);
    changed = st.blocks_changed;
  }, kTimeout);
  EXPECT_EQ(bytes, 0);
  EXPECT_EQ(changed, 4);
}

// Per-block timings are filled for every block, together within the step's wall clock with
// the optimizer step's time, and the evaluation loss is the training forward's loss.
TEST(RankTrainer, RecordsBlockTimesAndEvaluatesTheSameLoss) {
  const ModelSpec m = tiny_model();
  const Plan plan = Plan::parse("tp1d(t=2,sp=1);dp(recompute=1);tp2d(d1=2,d2=2,first=row);tp1d(t=4)", 4);
  const auto batch = random_batch(m, m.global_batch, 9);
  std::mutex mu;
  std::vector<std::string> failures;
  run_threads(4, [&](CommWorld& w) {
    RankTrainer tr(m, plan, w, options());
    const double eval = tr.eval_loss(batch.tokens, batch.targets);
    BlockTimes t;
    const auto t0 = std::chrono::steady_clock::now();
    const double train = tr.train_step(batch.tokens, batch.targets, &t);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    BlockTimes fb;  // collective: every rank, before the lock below
    tr.forward_backward(batch.tokens, batch.targets, &fb);
    double blocks = 0;
    std::lock_guard<std::mutex> lock(mu);
    const std::string r = "rank " + std::to_string(w.rank());
    if (eval != train) failures.push_back(r + ": eval loss differs from the training loss");
    if (t.fwd_s.size() != 4 || t.bwd_s.size() != 4 || t.comm_s.size() != 4) {
      failures.push_back(r + ": one time per block expected");
      return;
    }
    for (int b = 0; b < 4; ++b) {
      if (!(t.fwd_s[b] > 0 && t.bwd_s[b] > 0 && t.comm_s[b] > 0))
        failures.push_back(r + ": block " + std::to_string(b) + " has a zero time");
      blocks += t.fwd_s[b] + t.bwd_s[b] + t.comm_s[b];
    }
    if (!(t.optimizer_s > 0)) failures.push_back(r + ": the optimizer step is not timed");
    if (blocks + t.optimizer_s > wall)
      failures.push_back(r + ": the blocks and the optimizer step take longer than the step");
    if (fb.optimizer_s != 0) failures.push_back(r + ": forward_backward timed an optimizer step");
  }, kTimeout);
  EXPECT_TRUE(failures.empty()) << failures.front();
}

}  // namespace
}  // namespace shardgym::live
