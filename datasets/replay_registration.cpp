// Registers shardgym/TPReplay-v0: PartitionEnv over a ReplayRun of ExperimentSpec::replay_trace.
#include <memory>
#include <stdexcept>

#include "datasets/replay_run.h"
#include "env/partition_env.h"
#include "env/registry.h"

namespace shardgym {
namespace {

constexpr const char* kReplayId = "shardgym/TPReplay-v0";

std::unique_ptr<Env> make_replay_env(const ExperimentSpec& spec) {
  if (spec.replay_trace.empty()) {
    throw std::invalid_argument(std::string(kReplayId) +
                                ": the experiment names no trace to play back (set "
                                "ExperimentSpec::replay_trace)");
  }
  return std::make_unique<PartitionEnv>(kReplayId,
                                        std::make_unique<ReplayRun>(spec, spec.replay_trace), spec);
}

}  // namespace

REGISTER_SHARDGYM_ENV(kReplayId,
                      "recorded trace played back: the recorded measurement for the recorded "
                      "plan, a failed step for any other",
                      make_replay_env);

}  // namespace shardgym
