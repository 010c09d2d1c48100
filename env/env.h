// Env: the Gymnasium contract in C++ (docs/design.md §5).
//
//   auto env = make_env("shardgym/TPSim-v0", spec);
//   auto [obs, info] = env->reset(42);
//   while (true) {
//     auto r = env->step(agent.act(obs, env->action_mask(), info.plan_indices));
//     if (r.terminated || r.truncated) break;
//     obs = r.obs, info = r.info;
//   }
//
// Action: one catalog index per block (MultiDiscrete, nvec = catalog size for every block),
// and with p > 1 pipeline stages one trailing component that moves a stage boundary
// (env/pipeline_action.h). The mask is flattened block-major, mask[b * K + k], followed by
// the pipeline component's entries. Observation: a flat float32 vector, per-block features
// then global features (layout in partition_env.h); EnvSpec::observation_parts names its
// slices, and Info::plan_indices gives the plan in force as catalog indices.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "env/space.h"
#include "runtime/core/measurement.h"
#include "runtime/core/plan.h"

namespace shardgym {

using Observation = std::vector<float>;
using Action = std::vector<int32_t>;

struct Info {
  Measurement measurement;                // raw figures of this step
  Plan plan;                              // the plan in force after the step
  // The same plan as catalog indices, one per block (-1: the block's strategy is not in the
  // catalog). Exact ints, so nobody has to decode them from the observation's floats.
  std::vector<int32_t> plan_indices;
  // Cheap extras: "raw_reward" (PartitionEnv's reward; kept when NormalizeReward rescales),
  // "baseline_latency_per_token_s" (NormalizeReward).
  std::map<std::string, double> scalars;
  std::string error;                      // non-empty when the step failed (truncated)
};

struct ResetResult {
  Observation obs;
  Info info;
};

struct StepResult {
  Observation obs;
  double reward = 0;
  bool terminated = false;
  bool truncated = false;
  Info info;
  // Set by a step_into caller that reads of the Info only error, plan_indices and
  // measurement (VectorEnv's buffers): the env stack may then leave info.plan and
  // info.scalars as they were, which spares copying the plan and updating the scalars' map on
  // every step. Everything else is as with step(), which always fills the whole Info.
  bool lean_info = false;
};

// A named slice of the flat observation (EnvPool's "obs:..." fields): entries
// [offset, offset + Π shape) of Observation, row-major in `shape`.
struct ObservationPart {
  std::string name;
  int64_t offset = 0;
  std::vector<int64_t> shape;
  std::string meaning;

  int64_t size() const {  // entries: the product of the shape
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// The part of `parts` named `name`; nullptr if there is none.
inline const ObservationPart* find_part(const std::vector<ObservationPart>& parts,
                                        const std::string& name) {
  for (const ObservationPart& p : parts)
    if (p.name == name) return &p;
  return nullptr;
}

// Immutable description of an env: id, spaces, limits (EnvPool's EnvSpec).
struct EnvSpec {
  std::string id;
  std::string description;
  Space observation_space;
  Space action_space;
  // Slices that tile observation_space in order (empty: the env names none).
  std::vector<ObservationPart> observation_parts;
  int num_blocks = 0;
  int catalog_size = 0;
  int pipeline_stages = 1;    // p > 1: the action's last component moves stage boundaries
  int share_groups = 0;       // n > 0: that component also sets data shares (share_action.h)
  int max_episode_steps = 0;  // 0 = none
  bool deterministic = true;
  std::string backend;        // "sim" | "live" | "replay"
};

class TrainingRun;

class Env {
 public:
  virtual ~Env() = default;
  virtual const EnvSpec& spec() const = 0;
  // nullopt: continue the seed sequence of the previous episode.
  virtual ResetResult reset(std::optional<uint64_t> seed = std::nullopt) = 0;
  // One virtual per operation (the step, the mask), each writing into the caller's buffers;
  // step() and action_mask() are the value-returning forms over them.
  //
  // The step into `out`, reusing its buffers (VectorEnv steps every env into one StepResult
  // it keeps): every field set as a fresh StepResult would have it, except that with
  // out.lean_info info.plan and info.scalars may be left as they were (see StepResult).
  // Throws std::invalid_argument for an action outside the space or the mask.
  virtual void step_into(const Action& action, StepResult& out) = 0;
  StepResult step(const Action& action) {
    StepResult r;  // lean_info false: the whole Info
    step_into(action, r);
    return r;
  }
  // The mask as 0/1 bytes into out[0, size), size = the sum of the action space's nvec;
  // throws std::logic_error if the mask has another size.
  virtual void action_mask_into(uint8_t* out, size_t size) const = 0;
  std::vector<uint8_t> action_mask() const;
  // The job underneath (for baselines, oracles, trace metadata).
  virtual TrainingRun& run() = 0;
  virtual const TrainingRun& run() const = 0;
  virtual int elapsed_steps() const = 0;
};

}  // namespace shardgym
