// The live runtime's placement geometry is the project's one geometry, runtime/core/placement.h
// (Box, BlockPlacement, place_block, block_param_shards, block_activation_box, ...). Code in
// namespace shardgym::live finds those names in the enclosing namespace shardgym; this header
// only keeps the old include path working.
#pragma once

#include "runtime/core/placement.h"
