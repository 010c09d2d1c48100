// The rank sets a live run communicates over, as plain data: what comm/gloo.h creates and
// what launch/world_limits.h counts sockets and threads for. Free of LibTorch, so the config loader
// can use it.
#pragma once

#include <vector>

namespace shardgym::live {

// Every rank set the strategies of docs/design.md §3 use on a world of `world_size` ranks, in a
// canonical order: for each TP degree t | P, the TP groups (t consecutive ranks) and the
// DP groups (stride t); for each 2D mesh d1 x d2 = t, the axis-1 groups (d2 consecutive ranks
// inside a TP group) and the axis-0 groups (stride d2 inside a TP group). Deduplicated,
// singletons and the world included.
std::vector<std::vector<int>> standard_group_sets(int world_size);

}  // namespace shardgym::live
