#include "env/vector_env.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "env/thread_pool.h"

namespace shardgym {

VectorEnv::VectorEnv(int num_envs, const std::function<std::unique_ptr<Env>(int)>& make,
                     int threads) {
  if (num_envs <= 0) {
    throw std::invalid_argument("VectorEnv: num_envs must be > 0, got " + std::to_string(num_envs));
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
  for (int64_t n : spec().action_space.nvec) mask_size_ += n;
  actions_.assign(envs_.size(), Action(spec().action_space.nvec.size()));
  results_.resize(envs_.size());
}

VectorEnv::~VectorEnv() = default;

std::vector<Observation> VectorEnv::reset(uint64_t seed,
                                          std::vector<std::vector<int32_t>>* plans) {
  std::vector<Observation> obs(envs_.size());
  if (plans) plans->assign(envs_.size(), {});
  pool_->parallel_for(size(), [&](int i) {
    ResetResult r = envs_[i]->reset(seed + i);
    obs[i] = std::move(r.obs);
    if (plans) (*plans)[i] = std::move(r.info.plan_indices);
  });
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
  out.plans.resize(n);
  pool_->parallel_for(size(), [&](int i) {
    StepResult r = envs_[i]->step(actions[i]);
    out.rewards[i] = r.reward;
    out.terminated[i] = r.terminated ? 1 : 0;
    out.truncated[i] = r.truncated ? 1 : 0;
    if (r.terminated || r.truncated) {
      out.final_obs[i] = std::move(r.obs);
      ResetResult again = envs_[i]->reset();  // autoreset: continues env i's seed sequence
      out.obs[i] = std::move(again.obs);
      out.plans[i] = std::move(again.info.plan_indices);
    } else {
      out.obs[i] = std::move(r.obs);
      out.plans[i] = r.info.plan_indices;
    }
    out.infos[i] = std::move(r.info);
  });
  return out;
}

std::vector<std::vector<uint8_t>> VectorEnv::action_masks() const {
  std::vector<std::vector<uint8_t>> masks(envs_.size());
  pool_->parallel_for(size(), [&](int i) { masks[i] = envs_[i]->action_mask(); });
  return masks;
}

void VectorEnv::write_row(int i, const Observation& obs, const Info& info,
                          const VectorBuffers& out) {
  const int64_t d = observation_size();
  const int blocks = spec().num_blocks;
  if (out.obs) {
    if (static_cast<int64_t>(obs.size()) != d) {
      throw std::logic_error("VectorEnv: env " + std::to_string(i) + " returned " +
                             std::to_string(obs.size()) + " observation values, expected " +
                             std::to_string(d));
    }
    std::memcpy(out.obs + i * d, obs.data(), sizeof(float) * static_cast<size_t>(d));
  }
  if (out.plan) {
    int32_t* row = out.plan + static_cast<int64_t>(i) * blocks;
    const size_t known = std::min(info.plan_indices.size(), static_cast<size_t>(blocks));
    std::copy_n(info.plan_indices.begin(), known, row);
    std::fill(row + known, row + blocks, -1);
  }
  if (out.mask) {
    // 0/1 (numpy bools), straight from the env's mask cache (Env::action_mask_into checks
    // the size).
    envs_[i]->action_mask_into(out.mask + i * mask_size_, static_cast<size_t>(mask_size_));
  }
}

void VectorEnv::reset_into(uint64_t seed, const VectorBuffers& out) {
  if (out.errors) out.errors->assign(envs_.size(), std::string());
  pool_->parallel_for(size(), [&](int i) {
    ResetResult r = envs_[i]->reset(seed + i);
    write_row(i, r.obs, r.info, out);
    if (out.reward) out.reward[i] = 0;
    if (out.terminated) out.terminated[i] = 0;
    if (out.truncated) out.truncated[i] = 0;
  });
}

void VectorEnv::step_into(const int32_t* actions, const VectorBuffers& out) {
  const int a = action_size();
  const int64_t d = observation_size();
  const int blocks = spec().num_blocks;
  if (out.errors) out.errors->assign(envs_.size(), std::string());
  pool_->parallel_for(size(), [&](int i) {
    Action& action = actions_[i];
    action.assign(actions + static_cast<int64_t>(i) * a, actions + static_cast<int64_t>(i + 1) * a);
    StepResult& r = results_[i];
    r.lean_info = true;  // the buffers take no Info but error and plan_indices
    envs_[i]->step_into(action, r);
    if (out.reward) out.reward[i] = r.reward;
    if (out.terminated) out.terminated[i] = r.terminated ? 1 : 0;
    if (out.truncated) out.truncated[i] = r.truncated ? 1 : 0;
    if (out.errors) (*out.errors)[i] = r.info.error;
    if (!(r.terminated || r.truncated)) {
      write_row(i, r.obs, r.info, out);
      return;
    }
    if (out.final_obs) std::copy(r.obs.begin(), r.obs.end(), out.final_obs + i * d);
    if (out.final_plan) {
      int32_t* row = out.final_plan + static_cast<int64_t>(i) * blocks;
      const size_t known = std::min(r.info.plan_indices.size(), static_cast<size_t>(blocks));
      std::copy_n(r.info.plan_indices.begin(), known, row);
      std::fill(row + known, row + blocks, -1);
    }
    ResetResult next = envs_[i]->reset();  // autoreset: continues env i's seed sequence
    write_row(i, next.obs, next.info, out);
  });
}

}  // namespace shardgym
