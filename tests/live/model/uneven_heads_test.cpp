// Uneven tensor-parallel shards on live ranks (strategy.h `tp1d(t=4,heads=3/2/2/1)`; docs/
// design.md, "Uneven work and an elastic world"): rank i of a tensor group holds heads_i heads
// and the same share of the FFN columns. The loss and every gradient equal the single-rank
// reference's for uneven splits alone, with sequence parallelism, chunks and recomputation, in
// random mixtures with every other kind, with micro-batches and with uneven data shares; and
// AdamW training goes on through repartitions between even and uneven splits with the
// reference trainer's losses, each rank holding exactly its heads' parameters.
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/catalog.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/placement.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_trainer.h"
#include "tests/live/model/equivalence_util.h"

namespace shardgym::live {
namespace {

using testing::Case;
using testing::kTimeout;
using testing::kTolDouble;

// 8 heads of width 2 (hidden 16): a tensor group of 4 can hold 1 to 5 heads per rank.
ModelSpec uneven_model() {
  ModelSpec m = testing::tiny_model();
  m.heads = 8;
  return m;
}

// Llama's blocks with 8 query groups of 2 heads (head_dim 4): a tensor group of 4 can hold 1
// to 5 groups per rank.
ModelSpec uneven_llama(bool tied = false) {
  ModelSpec m = testing::tiny_llama(tied);
  m.hidden = 64;
  m.heads = 16;
  m.kv_heads = 8;
  m.ffn = 64;
  return m;
}

// A random uneven split of `heads` over t ranks (each ≥ 1, not all equal), in whole query
// groups of `per_group` heads.
std::vector<int> random_heads(int heads, int t, std::mt19937& rng, int per_group = 1) {
  for (;;) {
    std::vector<int> h(t, per_group);
    for (int k = t; k < heads / per_group; ++k) h[rng() % t] += per_group;
    Strategy probe = Strategy::tp1d(t);
    probe.set_heads(h);
    if (probe.uneven()) return h;
  }
}

// Every tp1d entry of the catalog (sp, chunks, recompute as the catalog has them) with two
// random uneven splits, uniform over the blocks; then mixtures in which some blocks are uneven.
std::vector<Case> uneven_cases(const ModelSpec& m, int world, uint32_t seed) {
  std::mt19937 rng(seed);
  const int per_group = m.heads / m.kv_head_count();
  auto random_split = [&](int t) { return random_heads(m.heads, t, rng, per_group); };
  std::vector<Case> out;
  StrategyCatalog cat(m, world);
  for (int i = 0; i < cat.size(); ++i) {
    const Strategy base = cat.at(i);
    if (base.kind != StrategyKind::kTP1D || base.t < 2) continue;
    for (int k = 0; k < 2; ++k) {
      Strategy s = base;
      s.set_heads(random_split(s.t));
      out.push_back({"uniform:" + s.to_string(), Plan::uniform(s, m.num_blocks())});
    }
  }
  for (Case c : testing::mixture_cases(m, world, 16, 900 + world)) {
    for (Strategy& s : c.plan.blocks)
      if (s.kind == StrategyKind::kTP1D && s.t >= 2 && rng() % 3 != 0)
        s.set_heads(random_split(s.t));
    c.name = "mixture:" + c.plan.to_string();
    out.push_back(c);
  }
  for (Case& c : out)
    EXPECT_EQ(why_live_plan_invalid(m, c.plan, world), "") << c.name;
  return out;
}

bool any_uneven(const std::vector<Case>& cases, bool with_sp, bool with_chunks,
                bool with_recompute) {
  for (const Case& c : cases)
    for (const Strategy& s : c.plan.blocks)
      if (s.uneven() && s.sp == with_sp && (s.chunks > 1) == with_chunks &&
          s.recompute == with_recompute)
        return true;
  return false;
}

TEST(UnevenHeads, LossAndGradientsMatchTheReferenceOnTwoAndFourRanks) {
  const ModelSpec m = uneven_model();
  for (int world : {2, 4}) {
    const std::vector<Case> cases = uneven_cases(m, world, 17 + world);
    EXPECT_TRUE(any_uneven(cases, false, false, false)) << "P=" << world;
    EXPECT_TRUE(any_uneven(cases, true, false, false)) << "P=" << world << ": no sp case";
    testing::expect_equivalent(m, world, at::kDouble, kTolDouble, cases);
  }
}

// Llama's blocks: uneven splits in whole query groups (a group's query heads with its K and V
// heads; SwiGLU's gate/up pairs with the same share of the FFN), also in tied mixtures.
TEST(UnevenHeads, LlamaLossAndGradientsMatchTheReferenceOnTwoAndFourRanks) {
  for (int world : {2, 4}) {
    const ModelSpec m = uneven_llama(/*tied=*/world == 4);
    const std::vector<Case> cases = uneven_cases(m, world, 57 + world);
    EXPECT_TRUE(any_uneven(cases, false, false, false)) << "P=" << world;
    EXPECT_TRUE(any_uneven(cases, true, false, false)) << "P=" << world << ": no sp case";
    testing::expect_equivalent(m, world, at::kDouble, kTolDouble, cases);
  }
}

// A split that cuts a query group is refused by name (placement.cpp head_range).
TEST(UnevenHeads, LlamaSplitsThatCutAQueryGroupAreRefused) {
  const ModelSpec m = uneven_llama();
  const Plan cut = Plan::parse("uniform:tp1d(t=4,heads=5/3/4/4)", m.num_blocks());
  EXPECT_NE(why_live_plan_invalid(m, cut, 4).find("whole query groups"), std::string::npos)
      << why_live_plan_invalid(m, cut, 4);
}

TEST(UnevenHeads, MicroBatchesAndUnevenDataSharesMatchTheReference) {
  const ModelSpec m = uneven_model();
  const int world = 4;
  std::vector<Case> cases;
  for (const Case& c : testing::with_micro_batches(uneven_cases(m, world, 31), 2, world,
                                                   m.global_batch))
    cases.push_back(c);
  // Two share groups of 2 ranks taking 6 and 2 of the 8 rows: blocks of degree ≤ 2.
  std::mt19937 rng(5);
  for (const char* text : {"tp1d(t=2);tp1d(t=2,sp=1);dp;tp1d(t=2,chunks=2)",
                           "tp1d(t=2,sp=1);tp1d(t=2);tp1d(t=2,recompute=1);dp"}) {
    Case c{"", Plan::parse(text, m.num_blocks())};
    for (Strategy& s : c.plan.blocks)
      if (s.kind == StrategyKind::kTP1D) s.set_heads(random_heads(m.heads, s.t, rng));
    c.plan.pipeline.shares = {3, 1};
    c.name = c.plan.to_string();
    ASSERT_EQ(why_live_plan_invalid(m, c.plan, world), "") << c.name;
    cases.push_back(c);
  }
  testing::expect_equivalent(m, world, at::kDouble, kTolDouble, cases);
}

// Each rank holds exactly the parameters of its heads (placement.h boxes) and AdamW training
// through even → uneven → another uneven split → tp2d gives the reference trainer's losses.
// `plans`: the first plan, then the ones moved to at iterations 2, 4 and 6.
void expect_training_through_repartitions(const ModelSpec& m,
                                          const std::vector<std::string>& plans) {
  const int world = 4, iters = 8;
  const Plan p0 = Plan::parse(plans[0], m.num_blocks());
  testing::Moves moves;
  for (size_t k = 1; k < plans.size(); ++k)
    moves.push_back({2 * static_cast<int>(k), Plan::parse(plans[k], m.num_blocks())});
  for (const auto& [at_iter, p] : moves) ASSERT_EQ(why_live_plan_invalid(m, p, world), "");
  const testing::TrainingReference ref = testing::training_reference(m, iters, 47, 700);

  // Elements of every block's boxes on rank q under `p` (what the rank must hold).
  auto box_elements = [&](const Plan& p, int q) {
    int64_t n = 0;
    for (int b = 0; b < p.size(); ++b)
      n += block_param_elements(m, ModelSpec::block_kind(b), place_block(p.blocks[b], q, world));
    for (const ParamShard& s : outer_param_shards(m)) n += s.box.numel();
    return n;
  };
  std::vector<std::vector<int64_t>> held(world);
  const auto losses = testing::train_through_moves(
      m, world, p0, moves, ref, [&](RankTrainer& tr, int q, int, const RepartitionStats&) {
        held[q].push_back(tr.local_param_elements());
      });
  for (int q = 0; q < world; ++q) {
    ASSERT_NO_FATAL_FAILURE(testing::expect_reference_losses(losses[q], ref.losses, q));
    ASSERT_EQ(held[q].size(), moves.size());
    for (size_t k = 0; k < moves.size(); ++k)
      EXPECT_EQ(held[q][k], box_elements(moves[k].second, q)) << "rank " << q << " move " << k;
  }
  // The uneven split really is uneven on the ranks: rank 3 holds fewer of block 0's heads
  // than rank 0 in the first move's plan.
  EXPECT_LT(box_elements(moves[0].second, 3), box_elements(moves[0].second, 0));
}

TEST(UnevenHeads, TrainingThroughRepartitionsBetweenSplitsMatchesTheReference) {
  expect_training_through_repartitions(
      uneven_model(),
      {"tp1d(t=4);tp1d(t=4);tp1d(t=2);tp1d(t=4,sp=1)",
       "tp1d(t=4,heads=3/2/2/1);tp1d(t=4,heads=1/1/1/5);tp1d(t=2,heads=5/3);"
       "tp1d(t=4,sp=1,heads=2/3/2/1)",
       "tp1d(t=4,heads=1/2/2/3);tp1d(t=2,heads=1/7);tp1d(t=4,heads=2/2/1/3);tp1d(t=4)",
       "tp2d(d1=2,d2=2,first=row);tp1d(t=4,heads=1/5/1/1);dp;dp"});
}

// The same with Llama's blocks, 16 heads in 8 query groups of 2: every split in whole groups.
TEST(UnevenHeads, LlamaTrainingThroughRepartitionsBetweenSplitsMatchesTheReference) {
  expect_training_through_repartitions(
      uneven_llama(/*tied=*/true),
      {"tp1d(t=4);tp1d(t=4);tp1d(t=2);tp1d(t=4,sp=1)",
       "tp1d(t=4,heads=6/4/4/2);tp1d(t=4,heads=2/2/2/10);tp1d(t=2,heads=10/6);"
       "tp1d(t=4,sp=1,heads=4/6/4/2)",
       "tp1d(t=4,heads=2/4/4/6);tp1d(t=2,heads=2/14);tp1d(t=4,heads=4/4/2/6);tp1d(t=4)",
       "tp2d(d1=2,d2=2,first=row);tp1d(t=4,heads=2/10/2/2);dp;dp"});
}

}  // namespace
}  // namespace shardgym::live
