#include "env/env.h"

namespace shardgym {

std::vector<uint8_t> Env::action_mask() const {
  size_t size = 0;
  for (int64_t n : spec().action_space.nvec) size += static_cast<size_t>(n);
  std::vector<uint8_t> mask(size);
  action_mask_into(mask.data(), size);
  return mask;
}

}  // namespace shardgym
