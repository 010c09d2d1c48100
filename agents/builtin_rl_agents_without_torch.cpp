// `ppo` in a build configured with -DSHARDGYM_WITH_TORCH=OFF: configs that name it still load
// (its parameters are checked as usual), and creating the agent fails saying why.
#include <stdexcept>

#include "agents/agent.h"
#include "agents/ppo.h"

namespace shardgym {
namespace {

std::unique_ptr<Agent> ppo_unavailable(const ParsedId&, const EnvSpec&, uint64_t) {
  throw std::invalid_argument(
      "agent 'ppo' needs LibTorch, and this build has none (configured with "
      "-DSHARDGYM_WITH_TORCH=OFF); rebuild with -DSHARDGYM_WITH_TORCH=ON");
}

REGISTER_SHARDGYM_AGENT("ppo", "PPO: not in this build (needs LibTorch)", ppo_unavailable,
                        [](const ParsedId& id) { PPOConfig::from_id(id); });

}  // namespace
}  // namespace shardgym
