// VectorEnv: N envs stepped together on a thread pool (EnvPool / Gymnasium SyncVectorEnv
// semantics with autoreset: an env that ends is reset at once and its next observation is
// the reset one, continuing that env's seed sequence; the final observation is kept in
// `final_obs`). Results equal stepping the envs one after another. If an env throws (e.g. a
// masked action), the others still step and the exception of the lowest index is rethrown.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "env/env.h"

namespace shardgym {

class ThreadPool;

struct VectorStep {
  std::vector<Observation> obs;
  std::vector<double> rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<Observation> final_obs;  // non-empty only where the env ended this step
  std::vector<Info> infos;             // of the step, also where the env was then reset
  // The plan in force for `obs` (after autoreset) as catalog indices, one per block
  // (Info::plan_indices: the step's, or the reset's where the env ended): Agent::act's plan.
  std::vector<std::vector<int32_t>> plans;
};

// Flat destinations for step_into / reset_into, row i for env i, each owned by the caller
// (e.g. numpy arrays the Python binding returns as they are). A null pointer skips that
// result. Filling them inside the step's parallel loop spares the per-env vectors of
// VectorStep and one copy of everything: at 64 envs of a 64-block model the masks alone are
// 64 × 11,008 bytes per step.
struct VectorBuffers {
  float* obs = nullptr;                        // N × D, after autoreset
  int32_t* plan = nullptr;                     // N × B catalog indices, after autoreset
  uint8_t* mask = nullptr;                     // N × M, 0/1, after autoreset
  double* reward = nullptr;                    // N
  uint8_t* terminated = nullptr;               // N, 0/1
  uint8_t* truncated = nullptr;                // N, 0/1
  float* final_obs = nullptr;                  // N × D; rows of envs that did not end untouched
  int32_t* final_plan = nullptr;               // N × B; likewise
  std::vector<std::string>* errors = nullptr;  // resized to N; "" where the step did not fail
};

class VectorEnv {
 public:
  // make(i) builds env i; threads = 0 picks min(N, hardware threads).
  VectorEnv(int num_envs, const std::function<std::unique_ptr<Env>(int)>& make, int threads = 0);
  ~VectorEnv();

  int size() const { return static_cast<int>(envs_.size()); }
  const EnvSpec& spec() const { return envs_.front()->spec(); }
  // Env i is seeded with seed + i. `plans` (may be null) receives each env's plan in force
  // as catalog indices (Info::plan_indices).
  std::vector<Observation> reset(uint64_t seed, std::vector<std::vector<int32_t>>* plans = nullptr);
  VectorStep step(const std::vector<Action>& actions);
  std::vector<std::vector<uint8_t>> action_masks() const;
  Env& env(int i) { return *envs_.at(i); }

  // The same steps and resets, results written into `out` (D = observation size, B = blocks,
  // M = mask size, A = action size). `actions` is N × A, row-major. Plan indices come from
  // the envs' Info::plan_indices (-1: not in the catalog).
  void step_into(const int32_t* actions, const VectorBuffers& out);
  void reset_into(uint64_t seed, const VectorBuffers& out);
  int64_t observation_size() const { return spec().observation_space.flat_size(); }
  int64_t mask_size() const { return mask_size_; }
  int action_size() const { return static_cast<int>(spec().action_space.nvec.size()); }

 private:
  // Writes env i's observation, plan indices and mask rows after a reset or a step.
  void write_row(int i, const Observation& obs, const Info& info, const VectorBuffers& out);

  std::vector<std::unique_ptr<Env>> envs_;
  // step_into's per-env action and result, kept between steps so that a step reuses their
  // buffers (Env::step_into) instead of allocating a StepResult per env.
  std::vector<Action> actions_;
  std::vector<StepResult> results_;
  std::unique_ptr<ThreadPool> pool_;
  int64_t mask_size_ = 0;
};

}  // namespace shardgym
