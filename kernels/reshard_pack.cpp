#include "kernels/reshard_pack.h"

#include <algorithm>
#include <string>

namespace shardgym::kernels {

Region intersect(const Region& a, const Region& b) {
  Region r{std::max(a.r0, b.r0), std::min(a.r1, b.r1), std::max(a.c0, b.c0), std::min(a.c1, b.c1)};
  if (r.empty()) return Region{};
  return r;
}

int64_t missing_elements(const Region& want, const Region& have) {
  if (want.empty()) return 0;
  return want.size() - intersect(want, have).size();
}

void check_region(const Region& r, int64_t rows, int64_t cols) {
  if (r.r0 < 0 || r.c0 < 0 || r.r1 > rows || r.c1 > cols || r.r0 > r.r1 || r.c0 > r.c1) {
    throw std::out_of_range("region [" + std::to_string(r.r0) + "," + std::to_string(r.r1) + ")x[" +
                            std::to_string(r.c0) + "," + std::to_string(r.c1) +
                            ") is outside a " + std::to_string(rows) + "x" + std::to_string(cols) +
                            " matrix");
  }
}

}  // namespace shardgym::kernels
