#include "env/space.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <stdexcept>

namespace shardgym {
namespace {

TEST(Space, FlatSizeOfEachKind) {
  EXPECT_EQ(Space::discrete("d", 5).flat_size(), 1);
  EXPECT_EQ(Space::multi_discrete("m", {3, 3, 4}).flat_size(), 3);
  EXPECT_EQ(Space::box("b", {2, 3}, 0, 1).flat_size(), 6);
  EXPECT_EQ(Space::dict("x", {Space::box("b", {4}, 0, 1), Space::discrete("d", 2)}).flat_size(), 5);
}

TEST(Space, ConstructorsRejectBadArguments) {
  EXPECT_THROW(Space::discrete("d", 0), std::invalid_argument);
  EXPECT_THROW(Space::multi_discrete("m", {3, 0}), std::invalid_argument);
  EXPECT_THROW(Space::box("b", {2}, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(Space::box("b", {-1}, 0.0, 1.0), std::invalid_argument);
}

TEST(Space, ContainsChecksShapeBoundsAndIntegrality) {
  const Space box = Space::box("b", {3}, 0.0, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(box.contains(std::vector<float>{0.0f, 1.5f, 1e30f}));
  EXPECT_FALSE(box.contains(std::vector<float>{0.0f, -0.1f, 1.0f}));
  EXPECT_FALSE(box.contains(std::vector<float>{0.0f, 1.0f}));
  EXPECT_FALSE(box.contains(std::vector<float>{0.0f, std::numeric_limits<float>::quiet_NaN(), 1}));

  const Space md = Space::multi_discrete("m", {2, 4});
  EXPECT_TRUE(md.contains(std::vector<int32_t>{1, 3}));
  EXPECT_FALSE(md.contains(std::vector<int32_t>{2, 0}));  // 2 ≥ nvec[0]
  EXPECT_FALSE(md.contains(std::vector<int32_t>{0, -1}));
  EXPECT_FALSE(md.contains(std::vector<int32_t>{0}));
  EXPECT_TRUE(md.contains(std::vector<float>{1.0f, 3.0f}));
  EXPECT_FALSE(md.contains(std::vector<float>{0.5f, 3.0f}));

  const Space d = Space::discrete("d", 3);
  EXPECT_TRUE(d.contains(std::vector<int32_t>{2}));
  EXPECT_FALSE(d.contains(std::vector<int32_t>{3}));

  const Space dict = Space::dict("x", {Space::discrete("a", 2), Space::box("b", {2}, 0, 1)});
  EXPECT_TRUE(dict.contains(std::vector<float>{1.0f, 0.5f, 1.0f}));
  EXPECT_FALSE(dict.contains(std::vector<float>{2.0f, 0.5f, 1.0f}));
  EXPECT_FALSE(dict.contains(std::vector<float>{1.0f, 0.5f, 1.5f}));
}

TEST(Space, SampleStaysInsideAndCoversEveryValue) {
  const Space md = Space::multi_discrete("m", {3, 5});
  std::mt19937_64 rng(1);
  std::set<int> seen0, seen1;
  for (int i = 0; i < 500; ++i) {
    const std::vector<int32_t> a = md.sample(rng);
    ASSERT_TRUE(md.contains(a));
    seen0.insert(a[0]);
    seen1.insert(a[1]);
  }
  // 500 uniform draws miss one of 5 values with probability < 5·0.8^500: never in practice.
  EXPECT_EQ(seen0.size(), 3u);
  EXPECT_EQ(seen1.size(), 5u);
}

TEST(Space, SampleWithMaskDrawsOnlyAllowedEntries) {
  // Two dims with nvec 3 and 2: the mask is dims × max(nvec) = 2 × 3.
  const Space md = Space::multi_discrete("m", {3, 2});
  const std::vector<uint8_t> mask = {0, 1, 1,  //
                                     1, 0, 1};  // the last entry is past nvec[1]: ignored
  std::mt19937_64 rng(2);
  std::set<int> seen0;
  for (int i = 0; i < 200; ++i) {
    const std::vector<int32_t> a = md.sample(rng, &mask);
    EXPECT_NE(a[0], 0);
    EXPECT_EQ(a[1], 0);
    seen0.insert(a[0]);
  }
  EXPECT_EQ(seen0, (std::set<int>{1, 2}));
}

TEST(Space, SampleIsReproducibleForASeed) {
  const Space md = Space::multi_discrete("m", std::vector<int64_t>(16, 7));
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(md.sample(a), md.sample(b));
}

TEST(Space, SampleRejectsBadMasksAndBoxes) {
  const Space md = Space::multi_discrete("m", {2, 2});
  std::mt19937_64 rng(3);
  const std::vector<uint8_t> short_mask = {1, 1, 1};
  EXPECT_THROW(md.sample(rng, &short_mask), std::invalid_argument);
  const std::vector<uint8_t> empty_row = {1, 0, 0, 0};
  try {
    md.sample(rng, &empty_row);
    FAIL() << "a dimension without allowed values must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dimension 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Space::box("b", {2}, 0, 1).sample(rng), std::invalid_argument);

  const Space d = Space::discrete("d", 4);
  const std::vector<uint8_t> only2 = {0, 0, 1, 0};
  EXPECT_EQ(d.sample(rng, &only2), std::vector<int32_t>{2});
}

TEST(Space, ToStringNamesKindShapeAndFlags) {
  EXPECT_EQ(Space::discrete("d", 5).to_string(), "Discrete(5)");
  EXPECT_EQ(Space::multi_discrete("m", {3, 4}).to_string(), "MultiDiscrete([3, 4])");
  EXPECT_EQ(Space::multi_discrete("m", std::vector<int64_t>(64, 12)).to_string(),
            "MultiDiscrete(64*[12])");
  Space box = Space::box("b", {10}, 0, std::numeric_limits<double>::infinity());
  EXPECT_EQ(box.to_string(), "Box(0, inf, (10,), float32)");
  box.deterministic = false;
  box.platform_dependent = true;
  EXPECT_EQ(box.to_string(),
            "Box(0, inf, (10,), float32, deterministic=false, platform_dependent=true)");
  EXPECT_EQ(Space::dict("x", {Space::discrete("a", 2)}).to_string(), "Dict(a: Discrete(2))");
}

TEST(Space, DictFlagsFollowChildren) {
  Space live = Space::box("lat", {1}, 0, 1);
  live.deterministic = false;
  live.platform_dependent = true;
  const Space d = Space::dict("obs", {Space::discrete("a", 2), live});
  EXPECT_FALSE(d.deterministic);
  EXPECT_TRUE(d.platform_dependent);
}

}  // namespace
}  // namespace shardgym
