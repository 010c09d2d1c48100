// PPO on a VectorEnv, and PPO checkpoints (see ppo.h).
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "agents/agent_util.h"
#include "agents/evaluate.h"
#include "agents/ppo_impl.h"
#include "env/vector_env.h"

namespace shardgym {

PPO::Impl::Sampled PPO::Impl::sample(const std::vector<std::vector<float>>& obs,
                                     const std::vector<std::vector<uint8_t>>& masks,
                                     const std::vector<std::vector<int32_t>>& plans) {
  const int n = static_cast<int>(obs.size());
  Sampled out;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> usable = usable_mask(plans[i], masks[i]);
    out.obs.insert(out.obs.end(), obs[i].begin(), obs[i].end());
    out.mask.insert(out.mask.end(), usable.begin(), usable.end());
  }
  torch::NoGradGuard no_grad;
  torch::Tensor mask_t = mask_tensor(out.mask, n);
  auto fwd = net->forward(obs_tensor(out.obs, n), mask_t);
  ppo_detail::PlanDistribution dist = ppo_detail::distribution(fwd.first, mask_t);
  out.a = dist.sample(gen);
  out.logp = dist.block_log_prob(out.a).contiguous();
  out.value = fwd.second;
  return out;
}

std::vector<double> PPO::Impl::truncation_bootstrap(
    const std::vector<uint8_t>& terminated, const std::vector<uint8_t>& truncated,
    const std::vector<bool>& failed, const std::vector<std::vector<float>>& final_obs,
    double gamma) {
  const size_t n = terminated.size();
  std::vector<int> boot;
  std::vector<float> final_flat;
  for (size_t i = 0; i < n; ++i)
    if (truncated[i] && !terminated[i] && !failed[i] && !final_obs[i].empty()) {
      boot.push_back(static_cast<int>(i));
      final_flat.insert(final_flat.end(), final_obs[i].begin(), final_obs[i].end());
    }
  std::vector<double> out(n, 0.0);
  if (boot.empty()) return out;
  const std::vector<float> v = values(final_flat, static_cast<int64_t>(boot.size()));
  for (size_t j = 0; j < boot.size(); ++j) out[boot[j]] = gamma * v[j];
  return out;
}

PPOTrainResult PPO::train(VectorEnv& envs, int64_t steps,
                          const std::function<bool(const PPOUpdate&)>& on_update) {
  const auto t0 = std::chrono::steady_clock::now();
  const EnvSpec& spec = envs.spec();
  if (spec.num_blocks != impl_->blocks || spec.catalog_size != impl_->catalog ||
      agents_detail::pipeline_moves(spec) != impl_->moves ||
      spec.observation_space.flat_size() != impl_->obs_dim)
    throw std::invalid_argument("ppo train: the vector env's spaces differ from the agent's");
  const int n = envs.size();
  PPOTrainResult result;
  std::vector<std::vector<int32_t>> plans;  // the plan in force for obs (catalog indices)
  std::vector<Observation> obs = envs.reset(draw_seed(), &plans);
  std::vector<double> running(n, 0.0);
  impl_->reward_scale.start_episodes(n);
  const bool was_training = training_;
  training_ = true;
  restart_pending_ = false;
  dropped_.clear();
  while (result.env_steps < steps) {
    if (restart_pending_) {  // a fresh run (start_afresh): its own env seeds, no open episodes
      restart_pending_ = false;
      dropped_.clear();
      obs = envs.reset(draw_seed(), &plans);
      running.assign(n, 0.0);
      impl_->reward_scale.start_episodes(n);
    }
    for (const auto& [k, seed] : dropped_) {  // drop_episode(k): a fresh episode
      if (k >= n) throw std::invalid_argument("ppo train: no env " + std::to_string(k));
      ResetResult again = envs.env(k).reset(seed);
      obs[k] = std::move(again.obs);
      plans[k] = std::move(again.info.plan_indices);
      running[k] = 0;
    }
    dropped_.clear();
    Impl& m = *impl_;  // replaced by a restart
    PPORollout r;
    r.envs = n;
    int ended = 0;
    double ended_sum = 0;
    for (int t = 0; t < config_.rollout; ++t) {
      const Impl::Sampled smp = m.sample(obs, envs.action_masks(), plans);
      std::vector<Action> actions(n);
      for (int i = 0; i < n; ++i) actions[i] = m.env_action(smp.a[i].data_ptr<int64_t>());
      VectorStep s = envs.step(actions);
      std::vector<bool> failed(n);
      for (int i = 0; i < n; ++i)
        failed[i] = !s.infos[i].error.empty() || s.infos[i].measurement.oom;
      const std::vector<double> bootstrap =
          m.truncation_bootstrap(s.terminated, s.truncated, failed, s.final_obs, config_.gamma);
      r.obs.insert(r.obs.end(), smp.obs.begin(), smp.obs.end());
      r.mask.insert(r.mask.end(), smp.mask.begin(), smp.mask.end());
      r.act.insert(r.act.end(), smp.a.data_ptr<int64_t>(), smp.a.data_ptr<int64_t>() + n * m.rows);
      for (int i = 0; i < n; ++i) {
        const bool done = s.terminated[i] || s.truncated[i] || failed[i];
        double reward = m.learner_reward(i, s.rewards[i], failed[i], done);
        reward += bootstrap[i];  // 0 where the episode did not end by a time limit
        r.logp.insert(r.logp.end(), smp.logp[i].data_ptr<float>(),
                      smp.logp[i].data_ptr<float>() + m.rows);
        r.value.push_back(smp.value[i].item<float>());
        r.reward.push_back(static_cast<float>(reward));
        r.done.push_back(done ? 1 : 0);
        running[i] += s.rewards[i];
        // Out of memory ends the episode here even if the env would go on: with a plan in
        // force that does not fit, no action is valid.
        if (failed[i] && !s.terminated[i] && !s.truncated[i]) {
          ResetResult again = envs.env(i).reset();
          s.obs[i] = std::move(again.obs);
          s.plans[i] = std::move(again.info.plan_indices);
        }
        if (done) {
          result.episode_returns.push_back(running[i]);
          ended_sum += running[i];
          ++ended;
          running[i] = 0;
        }
      }
      obs = std::move(s.obs);
      plans = std::move(s.plans);
      result.env_steps += n;
      m.env_steps += n;
    }
    std::vector<float> flat_next;
    for (const Observation& o : obs) flat_next.insert(flat_next.end(), o.begin(), o.end());
    PPOUpdate u = m.learn(r, m.values(flat_next, n));
    u.episodes = ended;
    if (ended > 0) u.mean_episode_return = ended_sum / ended;
    result.updates.push_back(u);
    if (on_update && !on_update(u)) break;
  }
  training_ = was_training;
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

void PPO::train_vectorized(VectorEnv& envs, int64_t steps,
                           const std::function<bool(const TrainProgress&)>& on_progress) {
  const auto t0 = std::chrono::steady_clock::now();
  train(envs, steps, [&](const PPOUpdate& u) {
    if (!on_progress) return true;
    TrainProgress p;
    p.update = u.update;
    p.env_steps = u.env_steps;
    p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.mean_episode_return = u.mean_episode_return;
    p.episodes = u.episodes;
    return on_progress(p);
  });
}

uint64_t PPO::draw_seed() {
  return static_cast<uint64_t>(at::randint(1 << 30, {1}, impl_->gen).item<int64_t>());
}

void PPO::drop_episode(int env) {
  if (env < 0) throw std::invalid_argument("ppo: no env " + std::to_string(env));
  dropped_.emplace_back(env, draw_seed());  // the seed now: the generator's order as it was
}

void PPO::start_afresh(int run) {
  if (run < 1) throw std::invalid_argument("ppo: a fresh run is numbered from 1");
  run_ = run;
  const int updates = impl_->updates;
  const int64_t env_steps = impl_->env_steps;
  impl_ = std::make_unique<Impl>(spec_, run_config(run), restart_seed(seed_, run));
  impl_->updates = updates;
  impl_->env_steps = env_steps;
  restart_pending_ = true;
}

PPOConfig PPO::run_config(int run) const {
  PPOConfig c = config_;
  if (c.plan_alt) c.plan = run % 2 == 1;
  return c;
}

uint64_t restart_seed(uint64_t seed, int restart) {
  // splitmix64 (Steele, Lea, Flood 2014) of the seed offset by the restart count.
  uint64_t z = seed + static_cast<uint64_t>(restart) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace shardgym
