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
#include "tests/live/model/equivalence_util.h"

namespace shardgym::live {
namespace {

using testing::Case;
using testing::kTimeout;
using testing::kTolDouble;

ModelSpec exclusion_model() {
  ModelSpec m = testing::tiny_model();
  m.global_batch = 16;
  m.micro_batch = 16;
  return m;
}

// Whether `plan` with `weights` runs m micro-batches of G rows on `world` ranks, from the batch
// arithmetic: every degree divides a group's g = P/n ranks, and each training group's rows
// split over its ranks, into m, and each replica's rows per micro-batch into the chunks.
bool fits(const Plan& plan, const std::vector<int>& weights, int world, int G, int m) {
  const int n = static_cast<int>(weights.size()), g = world / n;
  const std::vector<int> rows = apportion(G, weights);
  for (int i = 0; i < n; ++i) {
    for (const Strategy& s : plan.blocks)
      if (g % s.degree() != 0) return false;
    if (weights[i] == 0) continue;
    if (rows[i] % g != 0 || (rows[i] / g) % m != 0) return false;
    for (const Strategy& s : plan.blocks)
      if ((rows[i] / (g / s.degree()) / m) % s.chunks != 0) return false;
  }
  return true;
}

std::vector<Case> exclusion_cases(const ModelSpec& model, int world,
                                  const std::vector<int>& weights, int m) {
  std::vector<Case> all = testing::uniform_cases(model, world);
  for (const Case& c : testing::mixture_cases(model, world, 12, 700 + world)) all.push_back(c);
  for (const Case& c : testing::degenerate_mesh_cases(model, world)) all.push_back(c);
  std::vector<Case> out;
  for (Case c : all) {
    if (!fits(c.plan, weights, world, static_cast<int>(model.global_batch), m)) continue;
    c.plan.pipeline.shares = weights;
    c.name += " @dp(" + shares_to_string(weights) + ") m=" + std::to_string(m);
    c.micro_batches = m;
    out.push_back(c);
  }
  return out;
}

bool excluded(const std::vector<int>& weights, int world, int q) {
  return weights[q / (world / static_cast<int>(weights.size()))] == 0;
}

// World, share weights (some 0), micro-batches.
using ExclusionSetup = std::tuple<int, std::vector<int>, int>;
class ExclusionEquivalence : public ::testing::TestWithParam<ExclusionSetup> {};

TEST_P(ExclusionEquivalence, TheTrainingGroupsMatchTheReferenceAndExcludedRanksHoldNothing) {
  const auto& [world, weights, m] = GetParam();
  const ModelSpec model = exclusion_model();
  const auto cases = exclusion_cases(model, world, weights, m);
  ASSERT_FALSE(cases.empty());
  const int g = world / static_cast<int>(weights.size());
  std::set<std::string> expected = {"dp", "chunks", "recompute"};
  if (g >= 2) expected.insert({"tp1d", "sp"});
  if (g >= 4) expected.insert({"tp2d-row", "tp2d-col"});
  const std::set<std::string> got_kinds = testing::covered_kinds(cases);
  for (const std::string& k : expected) EXPECT_TRUE(got_kinds.count(k)) << "no case uses " << k;

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

// Groups leave and come back while AdamW trains: the losses of 8 steps are the reference
// trainer's on every training rank. A group that leaves while the survivors keep their blocks
// moves nothing; when one group leaves and the other comes back in the same repartition, the
// leaving ranks hand every cell over before they drop it; a group that rejoins receives exactly
// the state its boxes hold, and an excluded rank holds none at any point.
TEST(Exclusion, TrainingThroughLeavingAndRejoiningMatchesTheReference) {
  const ModelSpec model = exclusion_model();
  const int world = 4, iters = 8;
  Plan p0 = Plan::parse("dp;tp1d(t=2);tp2d(d1=1,d2=2,first=row);tp1d(t=2,sp=1)", 4);
  p0.pipeline.shares = {1, 1};
  Plan p1 = p0;
  p1.pipeline.shares = {1, 0};  // group 1 ({2, 3}) leaves, the blocks stay
  Plan p2 = Plan::parse("tp1d(t=2,chunks=2);dp;tp1d(t=2,sp=1);dp(recompute=1)", 4);
  p2.pipeline.shares = {0, 1};  // group 1 comes back with new blocks, group 0 leaves
  Plan p3 = Plan::parse("tp2d(d1=2,d2=1,first=col);tp1d(t=2);dp;dp", 4);
  p3.pipeline.shares = {3, 1};  // group 0 comes back
  const std::vector<std::pair<int, Plan>> moves = {{2, p1}, {4, p2}, {6, p3}};
  for (const auto& [at_iter, p] : moves)
    ASSERT_EQ(why_live_plan_invalid(model, p, world) +
                  why_micro_batches_invalid(model, p, world, model.global_batch, 1),
              "")
        << p.to_string();
  TrainerOptions o;
  o.dtype = at::kDouble;
  o.lr = 1e-2;
  o.clip = 0.5;
  const auto init = testing::perturbed_params(model, at::kDouble, 43);
  std::vector<testing::Batch> batches;
  for (int i = 0; i < iters; ++i) batches.push_back(testing::random_batch(model, 16, 500 + i));
  const std::vector<double> want = testing::reference_losses(model, init, o, batches);

  std::mutex mu;
  std::vector<std::vector<double>> losses(world), received(world), elements(world);
  run_threads(world, [&](CommWorld& w) {
    RankTrainer tr(model, p0, w, o);
    tr.load_full_params(init);
    std::vector<double> l, r, e;
    for (int i = 0; i < iters; ++i) {
      for (const auto& [at_iter, p] : moves) {
        if (at_iter != i) continue;
        r.push_back(tr.repartition(p).bytes_received);
        e.push_back(static_cast<double>(tr.local_param_elements()));
      }
      l.push_back(tr.train_step(batches[i].tokens, batches[i].targets));
      if (i == iters - 1) EXPECT_EQ(tr.optimizer_step_count(), iters) << "rank " << w.rank();
    }
    std::lock_guard<std::mutex> lock(mu);
    losses[w.rank()] = l;
    received[w.rank()] = r;
    elements[w.rank()] = e;
  }, kTimeout);
  // What a rank of group 1 holds under p2 with all groups training (the state it must receive).
  int64_t p2_state = 0;
  {
    Plan all = p2;
    all.pipeline.shares = {1, 1};
    std::mutex m2;
    run_threads(world, [&](CommWorld& w) {
      RankTrainer tr(model, all, w, o);
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
    if (group0) EXPECT_GT(received[q][2], 0) << "rank " << q << ": a rejoining rank receives";
    EXPECT_GT(elements[q][2], 0) << "rank " << q;
  }
}

}  // namespace
}  // namespace shardgym::live
