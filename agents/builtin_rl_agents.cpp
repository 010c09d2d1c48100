// Registration of the LibTorch agents (built with SHARDGYM_WITH_TORCH).
#include "agents/agent.h"
#include "agents/ppo.h"

namespace shardgym {
namespace {

REGISTER_SHARDGYM_AGENT("ppo",
                        "PPO (LibTorch): shared per-block encoder, masked categorical head per "
                        "block, GAE; ppo(lr=3e-4,rollout=128,epochs=4,minibatches=4,...)",
                        make_ppo_agent, [](const ParsedId& id) { PPOConfig::from_id(id); });

}  // namespace
}  // namespace shardgym
