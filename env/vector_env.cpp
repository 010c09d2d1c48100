#include "env/vector_env.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "env/thread_pool.h"

namespace shardgym {

VectorEnv::VectorEnv(int num_envs, const std::function<std::unique_ptr<Env>(int)>& make,
                     int threads) {
  if (num_envs <= 0) {
    throw std::invalid_argument("VectorEnv: num_envs must be > 0, got " +
                                std::to_string(num_envs));
  }
  envs_.reserve(num_envs);
  for (int i = 0; i < num_envs; ++i) {
    std::unique_ptr<Env> env = make(i);
    if (!env) throw std::invalid_argument("VectorEnv: make(" + std::to_string(i) + ") gave null");
    if (i > 0) {
      const EnvSpec& a = envs_.front()->spec();
      const EnvSpec& b = env->spec();
      if (b.observation_space.flat_size() != a.observation_space.flat_size() ||
          b.action_space.flat_size() != a.action_space.flat_size() ||
          b.action_space.nvec != a.action_space.nvec) {
        throw std::invalid_argument("VectorEnv: env " + std::to_string(i) + " (" + b.id +
                                    ") has other spaces than env 0 (" + a.id + ")");
      }
    }
    envs_.push_back(std::move(env));
  }
  if (threads <= 0) {
    threads = std::min<int>(num_envs, std::max(1u, std::thread::hardware_concurrency()));
  }
  pool_ = std::make_unique<ThreadPool>(threads);
}

VectorEnv::~VectorEnv() = default;

std::vector<Observation> VectorEnv::reset(uint64_t seed) {
  std::vector<Observation> obs(envs_.size());
  pool_->parallel_for(size(), [&](int i) { obs[i] = envs_[i]->reset(seed + i).obs; });
  return obs;
}

VectorStep VectorEnv::step(const std::vector<Action>& actions) {
  if (static_cast<int>(actions.size()) != size()) {
    throw std::invalid_argument("VectorEnv::step: " + std::to_string(actions.size()) +
                                " actions for " + std::to_string(size()) + " envs");
  }
  const size_t n = envs_.size();
  VectorStep out;
  out.obs.resize(n);
  out.rewards.resize(n);
  out.terminated.resize(n);
  out.truncated.resize(n);
  out.final_obs.resize(n);
  out.infos.resize(n);
  pool_->parallel_for(size(), [&](int i) {
    StepResult r = envs_[i]->step(actions[i]);
    out.rewards[i] = r.reward;
    out.terminated[i] = r.terminated ? 1 : 0;
    out.truncated[i] = r.truncated ? 1 : 0;
    out.infos[i] = std::move(r.info);
    if (r.terminated || r.truncated) {
      out.final_obs[i] = std::move(r.obs);
      out.obs[i] = envs_[i]->reset().obs;  // autoreset: continues env i's seed sequence
    } else {
      out.obs[i] = std::move(r.obs);
    }
  });
  return out;
}

std::vector<std::vector<uint8_t>> VectorEnv::action_masks() const {
  std::vector<std::vector<uint8_t>> masks(envs_.size());
  pool_->parallel_for(size(), [&](int i) { masks[i] = envs_[i]->action_mask(); });
  return masks;
}

}  // namespace shardgym
