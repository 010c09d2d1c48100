// Registers the live env: PartitionEnv over a LiveRun.
#include <memory>

#include "env/partition_env.h"
#include "env/registry.h"
#include "runtime/live/driver/live_run.h"

namespace shardgym {
namespace {

REGISTER_SHARDGYM_ENV(
    "shardgym/TPLive-v0",
    "live tensor-parallel GPT training on c10d ranks (Gloo on CPU; threads or processes)",
    [](const ExperimentSpec& s) {
      return std::make_unique<PartitionEnv>("shardgym/TPLive-v0",
                                            std::make_unique<live::LiveRun>(s), s);
    });

}  // namespace
}  // namespace shardgym
