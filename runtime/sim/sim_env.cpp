// Registers the simulated env: PartitionEnv over a SimRun.
#include <memory>

#include "env/partition_env.h"
#include "env/registry.h"
#include "runtime/sim/sim_run.h"

namespace shardgym {
namespace {

REGISTER_SHARDGYM_ENV(
    "shardgym/TPSim-v0",
    "simulated tensor-parallel training run (α–β network, roofline compute, scenario dynamics)",
    [](const ExperimentSpec& s) {
      return std::make_unique<PartitionEnv>("shardgym/TPSim-v0", std::make_unique<SimRun>(s), s);
    });

}  // namespace
}  // namespace shardgym
