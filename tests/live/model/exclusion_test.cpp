// Excluded ranks on live ranks (a share group of weight 0, `@dp(w=1/0)`; docs/design.md §11):
// the groups that train take the whole batch, so the loss and every gradient equal the
// single-rank reference's for every strategy kind and random mixtures; an excluded rank holds no
// parameter or optimizer state and joins no collective of a step; and training goes on through
// repartitions in which groups leave and come back (a group that rejoins receives its state,
// AdamW moments included, from the ranks that hold it), with the reference trainer's losses.
#include <cmath>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/data_shares.h"
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

bool excluded(const std::vector<int>& weights, int world, int q) {
  return weights[q / (world / static_cast<int>(weights.size()))] == 0;
}

// Groups leave and come back while AdamW trains: the losses of 8 steps are the reference
// trainer's on every training rank. A group that leaves while the survivors keep their blocks
// moves nothing; when one group leaves and the other comes back in the same repartition, the
// leaving ranks hand every cell over before they drop it; a group that rejoins receives exactly
// the state its boxes hold, and an excluded rank holds none at any point.
TEST(Exclusion, TrainingThroughLeavingAndRejoiningMatchesTheReference) {
  const ModelSpec model = shares_model();
  const int world = 4, iters = 8;
  Plan p0 = Plan::parse("dp;tp1d(t=2);tp2d(d1=1,d2=2,first=row);tp1d(t=2,sp=1)", 4);
  p0.pipeline.shares = {1, 1};
  Plan p1 = p0;
  p1.pipeline.shares = {1, 0};  // group 1 ({2, 3}) leaves, the blocks stay
  Plan p2 = Plan::parse("tp1d(t=2,chunks=2);dp;tp1d(t=2,sp=1);dp(recompute=1)", 4);
  p2.pipeline.shares = {0, 1};  // group 1 comes back with new blocks, group 0 leaves
  Plan p3 = Plan::parse("tp2d(d1=2,d2=1,first=col);tp1d(t=2);dp;dp", 4);
  p3.pipeline.shares = {3, 1};  // group 0 comes back
  const testing::Moves moves = {{2, p1}, {4, p2}, {6, p3}};
  ASSERT_NO_FATAL_FAILURE(testing::assert_moves_run_live(model, moves, world));
  const testing::TrainingReference ref = testing::training_reference(model, iters, 43, 500);
  const std::vector<double>& want = ref.losses;

  std::vector<std::vector<double>> received(world), elements(world);
  const auto losses = testing::train_through_moves(
      model, world, p0, moves, ref, [&](RankTrainer& tr, int q, int, const RepartitionStats& st) {
        received[q].push_back(st.bytes_received);
        elements[q].push_back(static_cast<double>(tr.local_param_elements()));
      });
  // What a rank of group 1 holds under p2 with all groups training (the state it must receive).
  int64_t p2_state = 0;
  {
    Plan all = p2;
    all.pipeline.shares = {1, 1};
    std::mutex m2;
    run_threads(world, [&](CommWorld& w) {
      RankTrainer tr(model, all, w, ref.options);
      std::lock_guard<std::mutex> lock(m2);
      if (w.rank() == 2) p2_state = tr.local_param_elements();
    }, kTimeout);
  }
  ASSERT_GT(p2_state, 0);
  const double bytes = sizeof(double) * 3.0;  // value, exp_avg, exp_avg_sq per element
  for (int q = 0; q < world; ++q) {
    ASSERT_EQ(losses[q].size(), size_t(iters)) << "rank " << q;
    const bool group0 = q < 2;
    for (int i = 0; i < iters; ++i) {
      const bool trains = i < 2 || (i < 4 && group0) || (i >= 4 && i < 6 && !group0) || i >= 6;
      if (trains)
        EXPECT_NEAR(losses[q][i], want[i], kTolDouble * want[i]) << "rank " << q << " iter " << i;
      else
        EXPECT_TRUE(std::isnan(losses[q][i])) << "rank " << q << " iter " << i;
    }
    ASSERT_EQ(received[q].size(), 3u);
    EXPECT_EQ(received[q][0], 0) << "rank " << q << ": leaving moves nothing to the survivors";
    EXPECT_EQ(elements[q][0] == 0, !group0) << "rank " << q;
    EXPECT_EQ(received[q][1], group0 ? 0 : bytes * p2_state) << "rank " << q;
    EXPECT_EQ(elements[q][1] == 0, group0) << "rank " << q;
    if (group0) {
      EXPECT_GT(received[q][2], 0) << "rank " << q << ": a rejoining rank receives";
    }
    EXPECT_GT(elements[q][2], 0) << "rank " << q;
  }
}

// World, share weights (some 0), micro-batches.
using ExclusionSetup = std::tuple<int, std::vector<int>, int>;
class ExclusionEquivalence : public ::testing::TestWithParam<ExclusionSetup> {};

TEST_P(ExclusionEquivalence, TheTrainingGroupsMatchTheReferenceAndExcludedRanksHoldNothing) {
  const auto& [world, weights, m] = GetParam();
  const ModelSpec model = shares_model();
  const auto cases = testing::share_cases(model, world, weights, m, 700 + world);
  ASSERT_FALSE(cases.empty());
  testing::expect_kinds_of_groups(cases, world, static_cast<int>(weights.size()));

  const testing::Reference ref = testing::make_reference(model, at::kDouble);
  struct Seen {
    double loss = 0, grad_err = 0;
    int64_t elements = -1;
    int world_calls = -1;  // the world's collectives during a training step
    std::string worst;
  };
  std::vector<std::vector<Seen>> seen(cases.size(), std::vector<Seen>(world));
  std::mutex mu;
  run_threads(world, [&](CommWorld& w) {
    TrainerOptions o;
    o.dtype = at::kDouble;
    for (size_t c = 0; c < cases.size(); ++c) {
      RankTrainer tr(model, cases[c].plan, w, o);
      tr.load_full_params(ref.init);
      const int calls0 = w.world().stats().calls;
      const double loss = tr.forward_backward(ref.batch.tokens, ref.batch.targets, nullptr,
                                              cases[c].micro_batches);
      tr.optimizer_step();
      const int calls = w.world().stats().calls - calls0;
      const int64_t elements = tr.local_param_elements();
      // gather_full_grads is a utility over the whole world; the step above left the
      // gradients, and AdamW does not touch them.
      ParamMap grads = tr.gather_full_grads();
      Seen s;
      s.loss = loss;
      s.elements = elements;
      s.world_calls = calls;
      s.grad_err = testing::max_rel_err(grads, ref.grads, &s.worst);
      std::lock_guard<std::mutex> lock(mu);
      seen[c][w.rank()] = s;
    }
  }, kTimeout);
  double loss_max = 0, grad_max = 0;
  for (size_t c = 0; c < cases.size(); ++c)
    for (int q = 0; q < world; ++q) {
      const Seen& s = seen[c][q];
      const std::string where = cases[c].name + " rank " + std::to_string(q);
      EXPECT_LE(s.grad_err, kTolDouble) << where << ": gradient of " << s.worst;
      grad_max = std::max(grad_max, s.grad_err);
      if (excluded(weights, world, q)) {
        EXPECT_TRUE(std::isnan(s.loss)) << where << ": an excluded rank has no loss";
        EXPECT_EQ(s.elements, 0) << where << ": an excluded rank holds state";
        EXPECT_EQ(s.world_calls, 0) << where << ": an excluded rank joined the world";
      } else {
        const double err = std::abs(s.loss - ref.loss) / std::abs(ref.loss);
        EXPECT_LE(err, kTolDouble) << where << ": loss";
        loss_max = std::max(loss_max, err);
        EXPECT_GT(s.elements, 0) << where;
      }
    }
  std::printf("P=%d %s m=%d: %zu plans, max relative error: loss %.2e, gradients %.2e\n", world,
              shares_to_string(weights).c_str(), m, cases.size(), loss_max, grad_max);
}

INSTANTIATE_TEST_SUITE_P(
    Groups, ExclusionEquivalence,
    ::testing::Values(ExclusionSetup{2, {1, 0}, 1}, ExclusionSetup{2, {0, 1}, 2},
                      ExclusionSetup{4, {0, 1}, 1}, ExclusionSetup{4, {3, 0}, 2},
                      ExclusionSetup{4, {1, 0, 2, 1}, 1}, ExclusionSetup{8, {1, 0}, 1}));

}  // namespace
}  // namespace shardgym::live
