// Uneven data-parallel shares (runtime/core/data_shares.h): text, validity, apportionment.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/core/data_shares.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"

namespace shardgym {
namespace {

ModelSpec model16() {
  ModelSpec m = ModelSpec::gpt(/*layers=*/4, /*hidden=*/1024, /*heads=*/16, /*seq=*/512,
                               /*micro_batch=*/1, /*global_batch=*/16);
  m.name = "m";
  return m;
}

TEST(DataShares, TextRoundTripsAndKeepsThePipeline) {
  const int blocks = 8;
  for (const char* text : {"uniform:tp1d(t=4)@dp(w=4/5/5/2)",
                           "uniform:tp1d(t=4)@pp(p=2,m=4)@dp(w=1/0)",
                           "uniform:dp@dp(w=3/1)@pp(p=2)"}) {
    const Plan p = Plan::parse(text, blocks);
    EXPECT_FALSE(p.pipeline.shares.empty()) << text;
    EXPECT_EQ(Plan::parse(p.to_string(), blocks), p) << text << " -> " << p.to_string();
  }
  const Plan a = Plan::parse("uniform:tp1d(t=4)@dp(w=4/5/5/2)", blocks);
  EXPECT_EQ(a.pipeline.shares, (std::vector<int>{4, 5, 5, 2}));
  EXPECT_NE(a, Plan::parse("uniform:tp1d(t=4)@dp(w=4/5/2/5)", blocks));
  EXPECT_NE(a, Plan::parse("uniform:tp1d(t=4)", blocks));
}

TEST(DataShares, BadTextIsRefusedWithAReason) {
  for (const char* text :
       {"uniform:dp@dp(w=)", "uniform:dp@dp(w=1//2)", "uniform:dp@dp(w=-1/2)", "uniform:dp@dp(1/2)",
        "uniform:dp@dp(w=1/2)@dp(w=2/1)", "uniform:dp@pp(p=2)@pp(p=2)",
        "uniform:dp@dp(w=99999999/1)", "uniform:dp@pp(p=2,p=4)", "uniform:dp@pp(p=1000000)"}) {
    try {
      Plan::parse(text, 8);
      ADD_FAILURE() << text << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_GT(std::string(e.what()).size(), 10u) << text;
    }
  }
  try {
    Plan::parse("uniform:dp@pp(p=1000000)", 8);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("larger than"), std::string::npos) << e.what();
  }
}

TEST(DataShares, ApportionSumsToTheWholeAndFollowsTheWeights) {
  for (int total : {1, 7, 16, 33}) {
    for (const std::vector<int>& w :
         {std::vector<int>{1, 1, 1}, {4, 5, 5, 2}, {0, 3, 1}, {7}, {1, 0, 0, 0}}) {
      const std::vector<int> a = apportion(total, w);
      EXPECT_EQ(std::accumulate(a.begin(), a.end(), 0), total);
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] == 0) {
          EXPECT_EQ(a[i], 0);
        }
        const double exact = double(total) * w[i] / std::accumulate(w.begin(), w.end(), 0);
        EXPECT_LT(std::abs(a[i] - exact), 1.0);
      }
    }
  }
  EXPECT_EQ(apportion(16, {4, 4, 4, 4}), (std::vector<int>{4, 4, 4, 4}));
}

TEST(DataShares, BalancedSharesMinimiseTheSlowestGroup) {
  // One group at half speed: it gets fewer sequences, the slowest group's time is minimal.
  const std::vector<double> speed = {0.5, 1, 1, 1};
  const std::vector<int> s = balanced_shares(16, speed);
  EXPECT_EQ(std::accumulate(s.begin(), s.end(), 0), 16);
  double worst = 0;
  for (size_t i = 0; i < s.size(); ++i) worst = std::max(worst, s[i] / speed[i]);
  // Brute force over every split of 16 into 4 parts.
  double best = 1e9;
  for (int a = 0; a <= 16; ++a)
    for (int b = 0; a + b <= 16; ++b)
      for (int c = 0; a + b + c <= 16; ++c) {
        const int d = 16 - a - b - c;
        best = std::min(best, std::max({a / 0.5, double(b), double(c), double(d)}));
      }
  EXPECT_DOUBLE_EQ(worst, best);
  // A group that cannot train gets nothing.
  EXPECT_EQ(balanced_shares(16, {0, 1, 1, 1})[0], 0);
}

TEST(DataShares, ValidityNamesTheProblem) {
  const ModelSpec m = model16();
  const int world = 16;
  Plan p = Plan::parse("uniform:tp1d(t=4)@dp(w=1/1/1/1)", m.num_blocks());
  EXPECT_EQ(shares_invalid_reason(p, m, world), "");
  p = Plan::parse("uniform:tp1d(t=8)@dp(w=1/1/1/1)", m.num_blocks());  // t=8 spans 2 groups
  EXPECT_NE(shares_invalid_reason(p, m, world).find("does not divide"), std::string::npos);
  p = Plan::parse("uniform:tp1d(t=4)@dp(w=1/1/1)", m.num_blocks());  // 3 groups of 16 ranks
  EXPECT_NE(shares_invalid_reason(p, m, world).find("do not split"), std::string::npos);
  p = Plan::parse("uniform:tp1d(t=4)@dp(w=0/0/0/0)", m.num_blocks());
  EXPECT_NE(shares_invalid_reason(p, m, world).find("weight 0"), std::string::npos);
  p = Plan::parse("uniform:tp1d(t=4)@dp(w=100/1/1/1)", m.num_blocks());  // 1/103 of 16 seqs
  EXPECT_NE(shares_invalid_reason(p, m, world).find("no sequence"), std::string::npos);
  EXPECT_NE(p.validate(m, world), "");
}

TEST(DataShares, WorkSumsToTheWorldAndExcludedRanksHaveNone) {
  const std::vector<double> w = share_work({4, 6, 6, 0}, 16, 16, 2);  // 2 stages of 8, groups of 2
  ASSERT_EQ(w.size(), 16u);
  EXPECT_DOUBLE_EQ(std::accumulate(w.begin(), w.end(), 0.0), 16.0);
  for (int r : {6, 7, 14, 15}) EXPECT_EQ(w[r], 0.0) << r;  // group 3 of both stages
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_DOUBLE_EQ(w[2], 1.5);
  EXPECT_DOUBLE_EQ(w[10], 1.5);
  for (double x : share_work({}, 16, 16, 2)) EXPECT_EQ(x, 1.0);
}

}  // namespace
}  // namespace shardgym
