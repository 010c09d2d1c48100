// PPO's internals shared by ppo.cpp (agent API, learning, save/load) and ppo_train.cpp
// (VectorEnv training). Private to shardgym::agents_rl: includes LibTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "agents/plan_polish.h"
#include "agents/ppo.h"
#include "agents/ppo_checkpoint_check.h"
#include "agents/ppo_net.h"
#include "agents/return_scale.h"

namespace shardgym {

// A rollout, time-major and flat: step t of env i is row t·envs + i.
struct PPORollout {
  int envs = 1;
  std::vector<float> obs;     // rows × D
  std::vector<uint8_t> mask;  // rows × (B·K + M), the env's layout (M pipeline choices)
  std::vector<int64_t> act;   // rows × R (R = B, + 1 with a pipeline component, + 3 plan rows)
  std::vector<float> logp;    // rows × R: log-probability of each block's entry (and move)
  std::vector<float> value, reward;
  std::vector<uint8_t> done;  // the episode ended at this step (no bootstrap from the next)

  int64_t rows() const { return static_cast<int64_t>(value.size()); }
  void clear();
};

struct PPO::Impl {
  Impl(const EnvSpec& spec, const PPOConfig& config, uint64_t seed);

  int blocks, catalog, obs_dim, globals;
  int moves, rows, width;  // pipeline choices M (0: none); R = B (+ 1) (+ 3); W = max(K, M, 2)
  int env_rows;            // B (+ 1): the env's action
  int plan_row = -1;       // the plan-move row (then attention, MLP); -1 = no plan rows
  PPOConfig config;
  ppo_detail::PolicyNet net{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  at::Generator gen;
  int updates = 0;
  int64_t env_steps = 0;
  // The run's conditions among the globals (the plan rows' input, agents/plan_polish.h).
  size_t conditions = 0;
  // norm_reward (PPOConfig): the returns' statistics (env 0 is the agent API's episode).
  ReturnScale reward_scale;
  // The reward learning uses for env i's step (the agent API: env 0): fail_reward for a failed
  // step, else the env's, scaled where norm_reward is on (which also feeds the statistics).
  double learner_reward(int i, double reward, bool failed, bool done) {
    if (failed) return config.fail_reward;
    return config.norm_reward ? reward_scale.scale(i, reward, config.gamma, done) : reward;
  }

  // Agent-API path (one env): the step act() took, waiting for observe().
  PPORollout buffer;
  bool pending = false;
  std::vector<float> pending_obs;
  std::vector<uint8_t> pending_mask;
  std::vector<int64_t> pending_act;  // the policy's rows (R)
  Action pending_env_act;            // what the env got
  std::vector<float> pending_logp;   // per row
  float pending_value = 0;
  bool have_next = false;
  std::vector<float> next_obs;

  // The env's mask with every empty block row given the block's entry in force (`plan`,
  // Agent::act's), or the last entry where that strategy is outside the catalog: a block with
  // nothing allowed cannot be helped; this keeps the distribution defined.
  std::vector<uint8_t> usable_mask(const std::vector<int32_t>& plan,
                                   const std::vector<uint8_t>& mask) const;
  torch::Tensor obs_tensor(const std::vector<float>& flat, int64_t rows) const;
  // The env's masks (n × (B·K + M)) as bool [n, R, W].
  torch::Tensor mask_tensor(const std::vector<uint8_t>& flat, int64_t n) const;
  // The env's action from the policy's rows: on a plan move (plan row = 1) every attention
  // block takes the attention row's entry and every MLP block the MLP row's; else each
  // block its own row. The pipeline entry is passed on.
  Action env_action(const int64_t* policy_rows) const;
  // Which rows an action used, [n, R] float: the block rows without a plan move, the entry
  // rows with one; the plan-move and pipeline rows always. Unused rows carry no gradient.
  torch::Tensor used_rows(const torch::Tensor& act) const;
  // Values of observations (no grad), [rows].
  std::vector<float> values(const std::vector<float>& flat, int64_t rows);

  // One step of a vector rollout: the envs' observations and usable masks, flattened, and
  // the actions sampled for them with their per-row log-probabilities and values.
  struct Sampled {
    std::vector<float> obs;
    std::vector<uint8_t> mask;
    torch::Tensor a, logp, value;
  };
  Sampled sample(const std::vector<std::vector<float>>& obs,
                 const std::vector<std::vector<uint8_t>>& masks,
                 const std::vector<std::vector<int32_t>>& plans);
  // Time-limit truncations bootstrap from the value of their final observation: per env,
  // γ·V(final) for a truncated episode that did not fail (one batch), else 0.
  std::vector<double> truncation_bootstrap(const std::vector<uint8_t>& terminated,
                                           const std::vector<uint8_t>& truncated,
                                           const std::vector<bool>& failed,
                                           const std::vector<std::vector<float>>& final_obs,
                                           double gamma);

  // GAE over the rollout (next_values: one per env, after the last step), then the clipped
  // PPO update. Returns the update's figures.
  PPOUpdate learn(const PPORollout& r, const std::vector<float>& next_values);
};

}  // namespace shardgym
