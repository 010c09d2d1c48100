// Registers the simulated env: PartitionEnv over a SimRun. It reads only the common options
// (env/registry.h); its model, cluster and scenario are the experiment's own sections.
#include <memory>

#include "env/partition_env.h"
#include "env/registry.h"
#include "runtime/sim/sim_run.h"

namespace shardgym {
namespace {

EnvType sim_type() {
  EnvType t;
  t.id = "shardgym/TPSim-v0";
  t.description =
      "simulated tensor-parallel training run (α–β network, roofline compute, scenario dynamics)";
  t.factory = [](const ExperimentSpec& s) {
    return std::make_unique<PartitionEnv>("shardgym/TPSim-v0", std::make_unique<SimRun>(s), s);
  };
  // Envs of one spec side by side (vector envs) share their costs: a strategy or a pair of
  // layouts that all N envs meet is priced once (SimOptions::costs).
  t.siblings = [](const ExperimentSpec& s) -> EnvMaker {
    SimOptions options;
    options.costs = new_sim_cost_share();
    return [s, options] {
      return std::make_unique<PartitionEnv>("shardgym/TPSim-v0",
                                            std::make_unique<SimRun>(s, options), s);
    };
  };
  t.flags.deterministic = true;  // the seed drives the scenario's noise
  return t;
}

REGISTER_SHARDGYM_ENV(sim_type());

}  // namespace
}  // namespace shardgym
