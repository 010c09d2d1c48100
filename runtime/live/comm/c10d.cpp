#include "runtime/live/comm/c10d.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/live/comm/gloo.h"  // format_ranks

namespace shardgym::live {
namespace detail {

std::string format_group(const std::vector<int>& ranks) {
  return (ranks.size() > 1 ? "group" : "self") + format_ranks(ranks);
}

int group_rank_of(const std::vector<int>& ranks, int rank, int world_size) {
  const bool sorted = std::is_sorted(ranks.begin(), ranks.end()) &&
                      std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end();
  const bool in_range = !ranks.empty() && ranks.front() >= 0 && ranks.back() < world_size;
  if (!sorted || !in_range || !std::binary_search(ranks.begin(), ranks.end(), rank)) {
    throw std::invalid_argument("rank " + std::to_string(rank) + ": group " + format_ranks(ranks) +
                                " must be sorted, unique, inside [0," + std::to_string(world_size) +
                                ") and contain this rank");
  }
  return static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

std::vector<int> all_ranks(int world_size) {
  std::vector<int> all(world_size);
  for (int i = 0; i < world_size; ++i) all[i] = i;
  return all;
}

}  // namespace detail

}  // namespace shardgym::live
