// LogNormalNoise (noise.h): generators of one σ share one level table, never their draws.
#include "runtime/sim/noise.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace shardgym {
namespace {

std::vector<double> draws(LogNormalNoise& n, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(n.next());
  return out;
}

TEST(LogNormalNoise, GeneratorsShareTheTableOfTheirSigmaOnly) {
  // Draws of σ = 0.02 from a generator alone, before any other exists.
  std::vector<double> alone;
  {
    LogNormalNoise n(0.02);
    n.seed(3);
    alone = draws(n, 40);
  }
  auto a = std::make_unique<LogNormalNoise>(0.02);
  LogNormalNoise b(0.05), c(0.02);
  a->seed(3), b.seed(3), c.seed(3);
  // Interleaved: each keeps its own random state.
  std::vector<double> da, dc;
  for (int i = 0; i < 40; ++i) da.push_back(a->next()), dc.push_back(c.next());
  EXPECT_EQ(da, alone);
  EXPECT_EQ(dc, alone);
  // Another σ has its own table: the same random bits give wider factors.
  const std::vector<double> db = draws(b, 40);
  double spread_a = 0, spread_b = 0;
  for (int i = 0; i < 40; ++i) {
    EXPECT_NE(db[i], da[i]) << "draw " << i;
    spread_a += (da[i] - 1) * (da[i] - 1), spread_b += (db[i] - 1) * (db[i] - 1);
  }
  EXPECT_GT(spread_b, 4 * spread_a);  // σ 2.5× larger: variance about 6× larger
  // A copy continues identically; the table outlives the generator that built it.
  LogNormalNoise copy = c;
  a.reset();
  EXPECT_EQ(draws(copy, 20), draws(c, 20));
  LogNormalNoise zero(0);
  EXPECT_EQ(draws(zero, 3), std::vector<double>(3, 1.0));
}

}  // namespace
}  // namespace shardgym
