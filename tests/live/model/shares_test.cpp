// Uneven data-parallel shares on live ranks (`@dp(w=...)`, runtime/core/data_shares.h): each
// share group trains its share of the global batch, the loss is the mean over all tokens and
// gradients are summed, so the loss and every gradient equal the single-rank reference's, for
// every strategy kind and random mixtures whose degrees fit a share group, with and without
// micro-batches; training continues through repartitions that change blocks and shares; and
// shares the batch cannot serve are refused with their group and numbers.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/data_shares.h"
#include "runtime/core/live_memory.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_trainer.h"
#include "runtime/live/tp/reference_gpt.h"
#include "tests/live/model/share_groups.h"

namespace shardgym::live {
namespace {

using testing::kTimeout;
using testing::kTolDouble;
using testing::shares_model;

std::vector<testing::Case> share_cases(const ModelSpec& model, int world,
                                       const std::vector<int>& weights, int m) {
  return testing::share_cases(model, world, weights, m, 900 + world);
}

// World, share weights, micro-batches.
using ShareSetup = std::tuple<int, std::vector<int>, int>;
class SharesEquivalence : public ::testing::TestWithParam<ShareSetup> {};

TEST_P(SharesEquivalence, EveryStrategyAndMixturesMatchTheReferenceInFloat64) {
  const auto& [world, weights, m] = GetParam();
  const ModelSpec model = shares_model();
  const auto cases = share_cases(model, world, weights, m);
  ASSERT_FALSE(cases.empty());
  testing::expect_kinds_of_groups(cases, world, static_cast<int>(weights.size()));
  testing::expect_equivalent(model, world, at::kDouble, kTolDouble, cases);
}

INSTANTIATE_TEST_SUITE_P(
    Groups, SharesEquivalence,
    ::testing::Values(ShareSetup{2, {3, 1}, 1}, ShareSetup{2, {1, 3}, 2},
                      ShareSetup{4, {3, 1}, 1}, ShareSetup{4, {3, 1}, 2},
                      ShareSetup{4, {1, 1, 1, 5}, 1}, ShareSetup{8, {3, 1}, 1}));

// Shares in float32 too (the oneDNN products and overlapped chunks).
TEST(SharesEquivalence, MixturesWithSharesMatchTheReferenceInFloat32) {
  const ModelSpec model = shares_model();
  testing::expect_equivalent(model, 4, at::kFloat, testing::kTolFloat,
                             share_cases(model, 4, {1, 3}, 1));
}

// Training through repartitions that change blocks and shares together, and shares alone: the
// losses of 8 AdamW steps are the reference trainer's, and a change of shares alone moves no
// state (only rows of the batch change hands).
TEST(Shares, TrainingThroughShareChangesMatchesTheReference) {
  const ModelSpec model = shares_model();
  const int world = 4, iters = 8;
  const Plan p0 = Plan::parse("dp;tp1d(t=2);tp2d(d1=2,d2=2,first=row);tp1d(t=4,sp=1)", 4);
  Plan p1 = Plan::parse("tp1d(t=2,chunks=2);dp;tp1d(t=2,sp=1);dp(recompute=1)", 4);
  p1.pipeline.shares = {3, 1};
  Plan p2 = p1;
  p2.pipeline.shares = {1, 3};
  Plan p3 = Plan::parse("dp;dp(chunks=2);dp;dp", 4);
  p3.pipeline.shares = {1, 1, 1, 5};
  const testing::Moves moves = {{2, p1}, {4, p2}, {6, p3}};
  ASSERT_NO_FATAL_FAILURE(testing::assert_moves_run_live(model, moves, world));
  const testing::TrainingReference ref = testing::training_reference(model, iters, 41, 400);

  std::vector<double> moved_by_shares_alone(world, -1);
  const auto got = testing::train_through_moves(
      model, world, p0, moves, ref, [&](RankTrainer&, int q, int i, const RepartitionStats& st) {
        if (i == 4) moved_by_shares_alone[q] = st.bytes_received + st.blocks_changed;
      });
  for (int q = 0; q < world; ++q) {
    ASSERT_NO_FATAL_FAILURE(testing::expect_reference_losses(got[q], ref.losses, q));
    EXPECT_EQ(moved_by_shares_alone[q], 0) << "rank " << q;
  }
}

// The rows really go unevenly (equivalence alone would also hold if the shares were ignored):
// under tp1d(t=2) on P = 4 with shares 3:1, the tensor group of share group 0 ({0, 1}, 12
// sequences) all-reduces activations 3 times the size of group 1's ({2, 3}, 4 sequences);
// without shares both move the same bytes.
TEST(Shares, EachGroupsTensorCollectivesCarryItsShareOfTheRows) {
  const ModelSpec model = shares_model();
  Plan plan = Plan::parse("uniform:tp1d(t=2)", model.num_blocks());
  const auto batch = testing::random_batch(model, 16, 8);
  std::mutex mu;
  std::map<std::vector<int>, std::vector<double>> bytes;  // by weights: per rank
  for (const std::vector<int>& w : {std::vector<int>{}, std::vector<int>{3, 1}}) {
    plan.pipeline.shares = w;
    std::vector<double> per_rank(4, 0);
    run_threads(4, [&](CommWorld& cw) {
      RankTrainer tr(model, plan, cw, {0, at::kDouble});
      const int q = cw.rank();
      Comm& tensor = cw.group({2 * (q / 2), 2 * (q / 2) + 1});
      const double b0 = tensor.stats().bytes;
      tr.forward_backward(batch.tokens, batch.targets);
      std::lock_guard<std::mutex> lock(mu);
      per_rank[q] = tensor.stats().bytes - b0;
    }, kTimeout);
    bytes[w] = per_rank;
  }
  const auto& even = bytes[{}];
  const auto& uneven = bytes[{3, 1}];
  ASSERT_GT(even[0], 0);
  for (int q = 0; q < 4; ++q) EXPECT_DOUBLE_EQ(even[q], even[0]) << "rank " << q;
  EXPECT_DOUBLE_EQ(uneven[0], uneven[1]);
  EXPECT_DOUBLE_EQ(uneven[2], uneven[3]);
  EXPECT_NEAR(uneven[0], 3 * uneven[2], 1e-9 * uneven[0]);
  EXPECT_NEAR(uneven[0] + uneven[2], 2 * even[0], 1e-9 * even[0]);
}

// An emulated straggler (set_compute_stretch) idles only on its own rank, in proportion to its
// compute, and changes no number: the stretched step's loss is the unstretched one's.
TEST(Shares, AStretchedRankIdlesAloneAndChangesNoNumber) {
  const ModelSpec model = shares_model();
  const Plan plan = Plan::parse("uniform:tp1d(t=2)", model.num_blocks());
  const auto batch = testing::random_batch(model, 16, 9);
  std::mutex mu;
  std::vector<double> idle(2, -1), loss_plain(2), loss_slow(2);
  std::vector<std::string> refused(2);
  run_threads(2, [&](CommWorld& w) {
    RankTrainer tr(model, plan, w, {0, at::kDouble});
    const double a = tr.forward_backward(batch.tokens, batch.targets);
    if (w.rank() == 1) tr.set_compute_stretch(4);
    BlockTimes times;
    const double b = tr.forward_backward(batch.tokens, batch.targets, &times);
    std::string why;
    try {
      tr.set_compute_stretch(0.5);
    } catch (const std::invalid_argument& e) {
      why = e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    idle[w.rank()] = times.stretch_s;
    loss_plain[w.rank()] = a;
    loss_slow[w.rank()] = b;
    refused[w.rank()] = why;
  }, kTimeout);
  EXPECT_EQ(idle[0], 0);
  EXPECT_GT(idle[1], 0);
  for (int q = 0; q < 2; ++q) {
    EXPECT_EQ(loss_slow[q], loss_plain[q]) << "rank " << q;
    EXPECT_NE(refused[q].find("[1, 100]"), std::string::npos) << refused[q];
  }
}

// What the live ranks cannot serve is refused before any rank runs, naming the group.
TEST(Shares, SharesTheBatchCannotServeAreRefusedWithTheirGroup) {
  const ModelSpec model = shares_model();  // G = 16
  Plan p = Plan::parse("uniform:tp1d(t=2)", model.num_blocks());
  p.pipeline.shares = {3, 1};  // 12 and 4 sequences over groups of 2 ranks
  EXPECT_EQ(why_live_plan_invalid(model, p, 4), "");
  EXPECT_EQ(why_micro_batches_invalid(model, p, 4, 16, 2), "");
  EXPECT_EQ(why_micro_batches_invalid(model, p, 4, 16, 4),
            "micro_batches = 4 does not divide the 6 sequences per rank of share group 0 (12 of "
            "the global batch's 16 sequences, data shares w=3/1)");
  p.pipeline.shares = {5, 3};  // 10 and 6: fine; 11 and 5 would not split over 2 ranks
  EXPECT_EQ(why_micro_batches_invalid(model, p, 4, 16, 1), "");
  p.pipeline.shares = {11, 5};
  EXPECT_EQ(why_micro_batches_invalid(model, p, 4, 16, 1),
            "share group 0 (11 of the global batch's 16 sequences, data shares w=11/5) does not "
            "split over its 2 ranks");
  p.pipeline.shares = {1, 0};  // group 1 excluded: group 0 takes all 16 (exclusion_test.cpp)
  EXPECT_EQ(why_live_plan_invalid(model, p, 4), "");
  p.pipeline.shares = {0, 0};
  EXPECT_NE(why_live_plan_invalid(model, p, 4).find("every group has weight 0"),
            std::string::npos)
      << why_live_plan_invalid(model, p, 4);
  Plan wide = Plan::parse("uniform:tp1d(t=4)", model.num_blocks());
  wide.pipeline.shares = {1, 1};  // degree 4 spans both groups of 2
  EXPECT_NE(why_live_plan_invalid(model, wide, 4).find("does not divide a share group of 2"),
            std::string::npos)
      << why_live_plan_invalid(model, wide, 4);

  // The trainer refuses on every rank before any collective.
  std::mutex mu;
  std::vector<std::string> errors(4);
  const auto batch = testing::random_batch(model, 16, 7);
  p.pipeline.shares = {3, 1};
  run_threads(4, [&](CommWorld& w) {
    RankTrainer tr(model, p, w, {0, at::kDouble});
    const std::string error = testing::train_step_error(tr, batch, 4);
    std::lock_guard<std::mutex> lock(mu);
    errors[w.rank()] = error;
  }, kTimeout);
  for (int q = 0; q < 4; ++q)
    EXPECT_NE(errors[q].find("share group 0"), std::string::npos) << "rank " << q << errors[q];
}

// The rank of the largest group holds the most activations: an uneven plan's estimate is above
// the even plan's, and with shares 1:1 it is the even plan's.
TEST(Shares, MemoryEstimateCountsTheLargestGroupsActivations) {
  const ModelSpec model = shares_model();
  const Plan even = Plan::parse("uniform:tp1d(t=2)", model.num_blocks());
  Plan same = even, uneven = even;
  same.pipeline.shares = {1, 1};
  uneven.pipeline.shares = {3, 1};
  const auto e = live_memory_estimate(model, even, 4, 1);
  EXPECT_DOUBLE_EQ(live_memory_estimate(model, same, 4, 1).activation_bytes, e.activation_bytes);
  EXPECT_NEAR(live_memory_estimate(model, uneven, 4, 1).activation_bytes,
              1.5 * e.activation_bytes, 1e-9 * e.activation_bytes);
  EXPECT_DOUBLE_EQ(live_memory_estimate(model, uneven, 4, 1).state_bytes, e.state_bytes);
}

}  // namespace
}  // namespace shardgym::live
