#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/reshard_pack.h"

namespace shardgym::kernels {
namespace {

TEST(ReshardPack, PackUnpackRoundTripsARegion) {
  const int64_t rows = 5, cols = 7;
  std::vector<double> src(rows * cols);
  std::iota(src.begin(), src.end(), 0.0);
  const Region r{1, 4, 2, 6};
  std::vector<double> buf(r.size());
  pack(src.data(), rows, cols, r, buf.data());
  EXPECT_EQ(buf.front(), 1 * cols + 2);
  EXPECT_EQ(buf.back(), 3 * cols + 5);
  std::vector<double> dst(rows * cols, -1.0);
  unpack(buf.data(), dst.data(), rows, cols, r);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const bool inside = i >= r.r0 && i < r.r1 && j >= r.c0 && j < r.c1;
      EXPECT_EQ(dst[i * cols + j], inside ? src[i * cols + j] : -1.0);
    }
}

TEST(ReshardPack, MissingElementsIsWantMinusOverlap) {
  // A column shard [0,8)x[0,4) moving to a row shard [0,4)x[0,8): half of it is held.
  EXPECT_EQ(missing_elements({0, 4, 0, 8}, {0, 8, 0, 4}), 16);
  EXPECT_EQ(missing_elements({0, 4, 0, 8}, {0, 4, 0, 8}), 0);
  EXPECT_EQ(missing_elements({0, 4, 0, 8}, {4, 8, 0, 8}), 32);
  EXPECT_TRUE(intersect({0, 2, 0, 2}, {2, 4, 2, 4}).empty());
}

TEST(ReshardPack, RejectsRegionsOutsideTheMatrix) {
  std::vector<float> src(4), dst(4);
  EXPECT_THROW(pack(src.data(), 2, 2, Region{0, 3, 0, 1}, dst.data()), std::out_of_range);
}

}  // namespace
}  // namespace shardgym::kernels
