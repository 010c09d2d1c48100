// VectorEnv: N envs stepped together on a thread pool (EnvPool / Gymnasium SyncVectorEnv
// semantics with autoreset: an env that ends is reset at once and its next observation is
// the reset one, continuing that env's seed sequence; the final observation is kept in
// `final_obs`). Results equal stepping the envs one after another. If an env throws (e.g. a
// masked action), the others still step and the exception of the lowest index is rethrown.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "env/env.h"

namespace shardgym {

class ThreadPool;

struct VectorStep {
  std::vector<Observation> obs;
  std::vector<double> rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<Observation> final_obs;  // non-empty only where the env ended this step
  std::vector<Info> infos;
};

class VectorEnv {
 public:
  // make(i) builds env i; threads = 0 picks min(N, hardware threads).
  VectorEnv(int num_envs, const std::function<std::unique_ptr<Env>(int)>& make, int threads = 0);
  ~VectorEnv();

  int size() const { return static_cast<int>(envs_.size()); }
  const EnvSpec& spec() const { return envs_.front()->spec(); }
  // Env i is seeded with seed + i.
  std::vector<Observation> reset(uint64_t seed);
  VectorStep step(const std::vector<Action>& actions);
  std::vector<std::vector<uint8_t>> action_masks() const;
  Env& env(int i) { return *envs_.at(i); }

 private:
  std::vector<std::unique_ptr<Env>> envs_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace shardgym
