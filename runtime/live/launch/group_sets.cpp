#include "runtime/live/launch/group_sets.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace shardgym::live {

std::vector<std::vector<int>> standard_group_sets(int world_size) {
  if (world_size < 1) throw std::invalid_argument("standard_group_sets: world_size < 1");
  const int p = world_size;
  std::vector<std::vector<int>> out;
  std::set<std::vector<int>> seen;
  auto add = [&](std::vector<int> g) {
    std::sort(g.begin(), g.end());
    if (seen.insert(g).second) out.push_back(std::move(g));
  };
  for (int t = 1; t <= p; ++t) {
    if (p % t) continue;
    for (int k = 0; k < p / t; ++k) {  // TP groups: t consecutive ranks
      std::vector<int> g;
      for (int i = 0; i < t; ++i) g.push_back(k * t + i);
      add(g);
    }
    for (int j = 0; j < t; ++j) {  // DP groups: stride t
      std::vector<int> g;
      for (int m = 0; m < p / t; ++m) g.push_back(j + m * t);
      add(g);
    }
    for (int d2 = 1; d2 <= t; ++d2) {  // 2D meshes d1 x d2 inside each TP group
      if (t % d2) continue;
      const int d1 = t / d2;
      for (int k = 0; k < p / t; ++k) {
        const int base = k * t;
        for (int a = 0; a < d1; ++a) {  // axis 1: d2 consecutive ranks
          std::vector<int> g;
          for (int i = 0; i < d2; ++i) g.push_back(base + a * d2 + i);
          add(g);
        }
        for (int c = 0; c < d2; ++c) {  // axis 0: stride d2
          std::vector<int> g;
          for (int a = 0; a < d1; ++a) g.push_back(base + c + a * d2);
          add(g);
        }
      }
    }
  }
  return out;
}

}  // namespace shardgym::live
