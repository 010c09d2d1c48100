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
#include "runtime/live/launch/memory_estimate.h"
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

ModelSpec shares_model() {  // G = 16 leaves room for uneven groups and 2 micro-batches
  ModelSpec m = testing::tiny_model();
  m.global_batch = 16;
  m.micro_batch = 16;
  return m;
}

// Whether `plan` with `weights` runs m micro-batches of a G-row batch on `world` ranks, from the
// batch arithmetic (not the runtime's check, so that a check refusing too much would show as
// missing cases): every degree divides a group's g = P/n ranks, each group's rows split over
// its ranks and then into m, and each replica's rows per micro-batch into the block's chunks.
bool fits(const Plan& plan, const std::vector<int>& weights, int world, int G, int m) {
  const int n = static_cast<int>(weights.size()), g = world / n;
  const std::vector<int> rows = apportion(G, weights);
  for (int i = 0; i < n; ++i) {
    if (rows[i] == 0 || rows[i] % g != 0 || (rows[i] / g) % m != 0) return false;
    for (const Strategy& s : plan.blocks) {
      if (g % s.degree() != 0) return false;
      const int local = rows[i] / (g / s.degree());
      if ((local / m) % s.chunks != 0) return false;
    }
  }
  return true;
}

std::vector<Case> share_cases(const ModelSpec& model, int world, const std::vector<int>& weights,
                              int m) {
  std::vector<Case> all = testing::uniform_cases(model, world);
  for (const Case& c : testing::mixture_cases(model, world, 12, 900 + world)) all.push_back(c);
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

// World, share weights, micro-batches.
using ShareSetup = std::tuple<int, std::vector<int>, int>;
class SharesEquivalence : public ::testing::TestWithParam<ShareSetup> {};

TEST_P(SharesEquivalence, EveryStrategyAndMixturesMatchTheReferenceInFloat64) {
  const auto& [world, weights, m] = GetParam();
  const ModelSpec model = shares_model();
  const auto cases = share_cases(model, world, weights, m);
  ASSERT_FALSE(cases.empty());
  // Share groups of g ≥ 2 ranks leave tensor parallelism inside them: with g = 2 every kind
  // with degree 2 (no 2D mesh of 2 × 2), with g = 4 the 2D meshes too.
  const int g = world / static_cast<int>(weights.size());
  std::set<std::string> expected = {"dp", "chunks", "recompute"};
  if (g >= 2) expected.insert({"tp1d", "sp"});
  if (g >= 4) expected.insert({"tp2d-row", "tp2d-col"});
  const std::set<std::string> got = testing::covered_kinds(cases);
  for (const std::string& k : expected) EXPECT_TRUE(got.count(k)) << "no case uses " << k;
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
  const auto init = testing::perturbed_params(model, at::kDouble, 41);
  std::vector<testing::Batch> batches;
  for (int i = 0; i < iters; ++i) batches.push_back(testing::random_batch(model, 16, 400 + i));
  const std::vector<double> want = testing::reference_losses(model, init, o, batches);

  std::mutex mu;
  std::vector<std::vector<double>> got(world);
  std::vector<double> moved_by_shares_alone(world, -1);
  run_threads(world, [&](CommWorld& w) {
    RankTrainer tr(model, p0, w, o);
    tr.load_full_params(init);
    std::vector<double> losses;
    double shares_alone = -1;
    for (int i = 0; i < iters; ++i) {
      for (const auto& [at_iter, p] : moves) {
        if (at_iter != i) continue;
        const RepartitionStats st = tr.repartition(p);
        if (i == 4) shares_alone = st.bytes_received + st.blocks_changed;
      }
      losses.push_back(tr.train_step(batches[i].tokens, batches[i].targets));
    }
    std::lock_guard<std::mutex> lock(mu);
    got[w.rank()] = losses;
    moved_by_shares_alone[w.rank()] = shares_alone;
  }, kTimeout);
  for (int q = 0; q < world; ++q) {
    ASSERT_EQ(got[q].size(), size_t(iters));
    for (int i = 0; i < iters; ++i)
      EXPECT_NEAR(got[q][i], want[i], kTolDouble * want[i]) << "rank " << q << " iter " << i;
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
  for (const std::vector<int> w : {std::vector<int>{}, std::vector<int>{3, 1}}) {
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
    std::string error;
    try {
      tr.train_step(batch.tokens, batch.targets, nullptr, 4);
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
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
