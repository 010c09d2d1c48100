// Registers shardgym/TPReplay-v0: PartitionEnv over a ReplayRun of ExperimentSpec::replay_trace.
#include <memory>
#include <stdexcept>

#include "datasets/replay_run.h"
#include "env/partition_env.h"
#include "env/registry.h"

namespace shardgym {
namespace {

constexpr const char* kReplayId = "shardgym/TPReplay-v0";

// The trace's content is checked here, at config load (and by Python's make), not when the
// env is made: every check of ReplayRun's constructor (the file is a trace, every complete
// episode was recorded with this model's blocks on this world, its plans are in the catalog).
void validate_replay(const ExperimentSpec& spec) {
  if (spec.replay_trace.empty())
    throw EnvOptionError("replay_trace", std::string("missing required key: ") + kReplayId +
                                             " plays back a recorded trace");
  // And the recorded observations have the width this config's env observes (a trace of
  // another config, or a crafted one, is refused rather than played back beside it).
  std::string why;
  try {
    auto run = std::make_unique<ReplayRun>(spec, spec.replay_trace);
    const ReplayRun* probe = run.get();
    PartitionEnv env(kReplayId, std::move(run), spec);
    const int64_t width = env.spec().observation_space.shape.at(0);
    for (int i = 0; i < probe->num_episodes() && why.empty(); ++i) {
      const TraceEpisode& ep = probe->recorded(i);
      if (ep.obs_dim != width)
        why = ep.info.name + " has observations of width " + std::to_string(ep.obs_dim) +
              "; this config's env observes " + std::to_string(width);
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty())
    throw EnvOptionError("replay_trace", "'" + spec.replay_trace +
                                             "' cannot be played back with this config: " + why);
}

std::unique_ptr<Env> make_replay_env(const ExperimentSpec& spec) {
  if (spec.replay_trace.empty()) {
    throw std::invalid_argument(std::string(kReplayId) +
                                ": the experiment names no trace to play back (set "
                                "ExperimentSpec::replay_trace)");
  }
  return std::make_unique<PartitionEnv>(kReplayId,
                                        std::make_unique<ReplayRun>(spec, spec.replay_trace), spec);
}

EnvType replay_type() {
  EnvType t;
  t.id = kReplayId;
  t.description =
      "recorded trace played back: the recorded measurement for the recorded plan, a failed "
      "step for any other";
  t.factory = make_replay_env;
  t.flags.deterministic = true;  // the same trace, the same figures
  t.flags.needs_trace = true;
  t.options = {EnvOption::path("trace", "replay_trace",
                               "shardgym-trace HDF5 file to play back (required)",
                               [](ExperimentSpec& s) -> std::string& { return s.replay_trace; })};
  t.validate = validate_replay;
  return t;
}

}  // namespace

REGISTER_SHARDGYM_ENV(replay_type());

}  // namespace shardgym
