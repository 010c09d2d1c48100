#include "agents/ppo.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "agents/agent_util.h"
#include "agents/polished.h"
#include "agents/ppo_impl.h"
#include "env/pipeline_action.h"
#include "env/partition_env.h"

namespace shardgym {

void PPORollout::clear() {
  obs.clear(), mask.clear(), act.clear(), logp.clear(), value.clear(), reward.clear();
  done.clear();
}

PPO::Impl::Impl(const EnvSpec& spec, const PPOConfig& cfg, uint64_t seed)
    : blocks(spec.num_blocks),
      catalog(spec.catalog_size),
      moves(agents_detail::pipeline_moves(spec)),
      rows(spec.num_blocks + (moves > 0 ? 1 : 0) + (cfg.plan ? 3 : 0)),
      width(std::max({spec.catalog_size, moves, cfg.plan ? 2 : 0})),
      env_rows(spec.num_blocks + (moves > 0 ? 1 : 0)),
      plan_row(cfg.plan ? env_rows : -1),
      config(cfg),
      gen(at::detail::createCPUGenerator(seed)) {
  if (blocks <= 0 || catalog <= 0)
    throw std::invalid_argument("ppo: the env spec has no blocks or an empty catalog");
  if (spec.observation_space.shape.size() != 1)
    throw std::invalid_argument("ppo: needs a flat observation (PartitionEnv layout)");
  obs_dim = static_cast<int>(spec.observation_space.shape[0]);
  // The pipeline part of the observation (after the link classes) is read as more globals.
  globals = obs_dim - blocks * PartitionEnv::kBlockFeatures;
  if (globals < PartitionEnv::kGlobalFixed)
    throw std::invalid_argument("ppo: observation of " + std::to_string(obs_dim) +
                                " values is too short for " + std::to_string(blocks) + " blocks");
  conditions = SubstitutionTables(spec).cond_index.size();
  const int pipeline_obs = pipeline_choices(spec.pipeline_stages);
  torch::manual_seed(seed);
  net = ppo_detail::PolicyNet(blocks, catalog, PartitionEnv::kBlockFeatures, globals, cfg.hidden,
                              cfg.keep, moves, cfg.plan ? cfg.plan_p : 0.0, pipeline_obs);
  if (cfg.keep) {
    torch::NoGradGuard no_grad;
    net->keep_bias.fill_(std::log(cfg.keep_p / (1 - cfg.keep_p) * std::max(1, catalog - 1)));
    if (moves > 0)  // choice 0 keeps the boundaries: the same start against M − 1 moves
      net->keep_bias[2].fill_(std::log(cfg.keep_p / (1 - cfg.keep_p) * std::max(1, moves - 1)));
  }
  // The plan entry rows have their own step size (plan_lr): Adam moves a parameter by about
  // lr per step, and at 3e-4 a row's logits move ~0.15 nats in 30 updates, too little to
  // single out a plan among K.
  std::vector<torch::Tensor> rest, plan_params;
  for (const auto& kv : net->named_parameters())
    (kv.key().rfind("pi_plan.", 0) == 0 ? plan_params : rest).push_back(kv.value());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(
                                torch::optim::AdamOptions(cfg.lr).eps(1e-5)));
  if (!plan_params.empty())
    groups.emplace_back(plan_params, std::make_unique<torch::optim::AdamOptions>(
                                         torch::optim::AdamOptions(cfg.plan_lr).eps(1e-5)));
  optimizer = std::make_unique<torch::optim::Adam>(std::move(groups),
                                                   torch::optim::AdamOptions(cfg.lr).eps(1e-5));
}

std::vector<uint8_t> PPO::Impl::usable_mask(const std::vector<int32_t>& plan,
                                            const std::vector<uint8_t>& mask) const {
  std::vector<uint8_t> out(mask);
  if (static_cast<int64_t>(mask.size()) != static_cast<int64_t>(blocks) * catalog + moves)
    throw std::invalid_argument("ppo: mask of " + std::to_string(mask.size()) +
                                " entries, expected " + std::to_string(blocks * catalog + moves));
  if (moves > 0) out[static_cast<size_t>(blocks) * catalog] = 1;  // keep: always allowed
  Action current;
  for (int b = 0; b < blocks; ++b) {
    bool any = false;
    for (int k = 0; k < catalog && !any; ++k) any = mask[b * catalog + k] != 0;
    if (any) continue;
    if (current.empty()) current = agents_detail::current_action(plan, blocks);
    out[b * catalog + (current[b] >= 0 && current[b] < catalog ? current[b] : catalog - 1)] = 1;
  }
  return out;
}

torch::Tensor PPO::Impl::obs_tensor(const std::vector<float>& flat, int64_t rows) const {
  return torch::from_blob(const_cast<float*>(flat.data()), {rows, obs_dim}, torch::kFloat32)
      .clone();
}

torch::Tensor PPO::Impl::mask_tensor(const std::vector<uint8_t>& flat, int64_t n) const {
  if (moves == 0 && plan_row < 0)
    return torch::from_blob(const_cast<uint8_t*>(flat.data()), {n, blocks, catalog},
                            torch::kUInt8)
        .to(torch::kBool);
  // Rows padded to W: the blocks' K entries, then the pipeline row's M, then the plan rows.
  const size_t in = static_cast<size_t>(blocks) * catalog + moves;
  torch::Tensor out = torch::zeros({n, rows, width}, torch::kBool);
  auto o = out.accessor<bool, 3>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = flat.data() + i * in;
    for (int b = 0; b < blocks; ++b)
      for (int k = 0; k < catalog; ++k) o[i][b][k] = row[static_cast<size_t>(b) * catalog + k];
    for (int c = 0; c < moves; ++c) o[i][blocks][c] = row[static_cast<size_t>(blocks) * catalog + c];
    if (plan_row < 0) continue;
    // An entry of a kind's row is allowed when every block of that kind allows it (each
    // block's mask is checked with the others as they are, so a whole-plan move can still
    // run out of memory: the step then fails and PPO learns fail_reward).
    bool any[2] = {false, false};
    for (int kind = 0; kind < 2; ++kind)
      for (int k = 0; k < catalog; ++k) {
        bool ok = kind < blocks;
        for (int b = kind; b < blocks && ok; b += 2) ok = row[static_cast<size_t>(b) * catalog + k];
        o[i][plan_row + 1 + kind][k] = ok;
        any[kind] = any[kind] || ok;
      }
    o[i][plan_row][0] = true;
    o[i][plan_row][1] = any[0] && (any[1] || blocks < 2);
    for (int kind = 0; kind < 2; ++kind)  // keeps the row's distribution defined; unused
      if (!any[kind]) o[i][plan_row + 1 + kind][0] = true;
  }
  return out;
}

Action PPO::Impl::env_action(const int64_t* r) const {
  Action out(r, r + env_rows);
  if (plan_row >= 0 && r[plan_row] == 1)
    for (int b = 0; b < blocks; ++b) out[b] = static_cast<int>(r[plan_row + 1 + b % 2]);
  return out;
}

torch::Tensor PPO::Impl::used_rows(const torch::Tensor& act) const {
  torch::Tensor used = torch::ones({act.size(0), rows});
  if (plan_row < 0) return used;
  torch::Tensor move = act.select(1, plan_row).to(torch::kFloat32).unsqueeze(1);  // [n, 1]
  used.narrow(1, 0, blocks).copy_((1 - move).expand({act.size(0), blocks}));
  used.narrow(1, plan_row + 1, 2).copy_(move.expand({act.size(0), 2}));
  return used;
}

std::vector<float> PPO::Impl::values(const std::vector<float>& flat, int64_t rows) {
  torch::NoGradGuard no_grad;
  std::vector<uint8_t> ones(static_cast<size_t>(rows) * (blocks * catalog + moves), 1);
  torch::Tensor v = net->forward(obs_tensor(flat, rows), mask_tensor(ones, rows)).second;
  return std::vector<float>(v.data_ptr<float>(), v.data_ptr<float>() + rows);
}

PPOUpdate PPO::Impl::learn(const PPORollout& r, const std::vector<float>& next_values) {
  const int64_t rows = r.rows(), n = r.envs, steps = rows / n;
  // GAE(γ, λ), backwards per env.
  std::vector<float> adv(rows), ret(rows);
  for (int64_t i = 0; i < n; ++i) {
    double last = 0;
    for (int64_t t = steps - 1; t >= 0; --t) {
      const int64_t k = t * n + i;
      const double next_v = t == steps - 1 ? next_values[i] : r.value[k + n];
      const double nonterminal = r.done[k] ? 0.0 : 1.0;
      const double delta = r.reward[k] + config.gamma * next_v * nonterminal - r.value[k];
      last = delta + config.gamma * config.lambda * nonterminal * last;
      adv[k] = static_cast<float>(last);
      ret[k] = static_cast<float>(last + r.value[k]);
    }
  }
  torch::Tensor obs = obs_tensor(r.obs, rows);
  torch::Tensor mask = mask_tensor(r.mask, rows);
  torch::Tensor act =
      torch::from_blob(const_cast<int64_t*>(r.act.data()), {rows, this->rows}, torch::kInt64)
          .clone();
  auto col = [&](const std::vector<float>& v) {
    return torch::from_blob(const_cast<float*>(v.data()), {rows}, torch::kFloat32).clone();
  };
  torch::Tensor old_logp =
      torch::from_blob(const_cast<float*>(r.logp.data()), {rows, this->rows}, torch::kFloat32)
          .clone();
  torch::Tensor old_value = col(r.value), b_adv = col(adv), b_ret = col(ret);

  PPOUpdate u;
  const int64_t mb = std::max<int64_t>(1, (rows + config.minibatches - 1) / config.minibatches);
  int batches = 0;
  double clipped = 0;
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    torch::Tensor perm = torch::randperm(rows, gen);
    for (int64_t start = 0; start < rows; start += mb) {
      torch::Tensor idx = perm.slice(0, start, std::min(rows, start + mb));
      auto [logits, value] = net->forward(obs.index_select(0, idx), mask.index_select(0, idx));
      ppo_detail::PlanDistribution dist =
          ppo_detail::distribution(logits, mask.index_select(0, idx));
      // Per-row log-ratios [m, R] (unused rows: 0); joint: their sum [m, 1].
      torch::Tensor b_act = act.index_select(0, idx);
      torch::Tensor used = used_rows(b_act);  // [m, R]
      torch::Tensor log_ratio = (dist.block_log_prob(b_act) - old_logp.index_select(0, idx)) * used;
      if (!config.block_ratio) {
        log_ratio = log_ratio.sum(1, /*keepdim=*/true);
        used = torch::ones_like(log_ratio);
      }
      torch::Tensor entropy = dist.entropy().mean();
      torch::Tensor ratio = log_ratio.exp();
      torch::Tensor a = b_adv.index_select(0, idx);
      if (config.norm_adv && a.size(0) > 1) a = (a - a.mean()) / (a.std() + 1e-8);
      a = a.unsqueeze(1);
      // Unused rows have log-ratio 0 (ratio 1, no gradient) and weight 0.
      torch::Tensor pg =
          (torch::max(-a * ratio, -a * torch::clamp(ratio, 1 - config.clip, 1 + config.clip)) *
           used)
              .sum(1)
              .mean();
      torch::Tensor target = b_ret.index_select(0, idx), v_old = old_value.index_select(0, idx);
      torch::Tensor v_loss;
      if (config.clip_vloss) {
        torch::Tensor v_clip = v_old + torch::clamp(value - v_old, -config.clip, config.clip);
        v_loss = 0.5 * torch::max((value - target).pow(2), (v_clip - target).pow(2)).mean();
      } else {
        v_loss = 0.5 * (value - target).pow(2).mean();
      }
      torch::Tensor loss = pg - config.ent_coef * entropy + config.vf_coef * v_loss;
      optimizer->zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(net->parameters(), config.max_grad_norm);
      optimizer->step();
      {
        torch::NoGradGuard no_grad;
        u.approx_kl += ((ratio - 1) - log_ratio).sum(1).mean().item<double>();
        torch::Tensor out = ((ratio - 1).abs() > config.clip).to(torch::kFloat32) * used;
        clipped += out.sum().item<double>() / std::max(1.0, used.sum().item<double>());
      }
      u.policy_loss += pg.item<double>();
      u.value_loss += v_loss.item<double>();
      u.entropy += entropy.item<double>();
      ++batches;
    }
  }
  u.policy_loss /= batches, u.value_loss /= batches, u.entropy /= batches;
  u.approx_kl /= batches;
  u.clip_fraction = clipped / batches;
  u.update = ++updates;
  u.env_steps = env_steps;
  u.mean_episode_return = std::numeric_limits<double>::quiet_NaN();
  return u;
}

PPO::PPO(const EnvSpec& spec, const PPOConfig& config, uint64_t seed, std::string name)
    : name_(std::move(name)),
      config_(config),
      spec_(spec),
      seed_(seed),
      impl_(std::make_unique<Impl>(spec, config, seed)) {}

PPO::~PPO() = default;

int64_t PPO::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : impl_->net->parameters()) n += p.numel();
  return n;
}

Action PPO::act(const Observation& obs, const std::vector<uint8_t>& mask,
                const std::vector<int32_t>& plan) {
  Impl& m = *impl_;
  if (static_cast<int>(obs.size()) != m.obs_dim)
    throw std::invalid_argument("ppo: observation of " + std::to_string(obs.size()) +
                                " values, the env spec says " + std::to_string(m.obs_dim));
  torch::NoGradGuard no_grad;
  std::vector<uint8_t> usable = m.usable_mask(plan, mask);
  torch::Tensor mask_t = m.mask_tensor(usable, 1);
  // decode=pref reads the bonus-free logits: one forward pass either way.
  const bool pref = !training_ && config_.decode_pref && config_.keep;
  auto [logits, value] = m.net->forward(m.obs_tensor(obs, 1), mask_t, /*with_keep=*/!pref);
  ppo_detail::PlanDistribution dist = ppo_detail::distribution(logits, mask_t);
  torch::Tensor a;
  if (training_) {
    a = dist.sample(m.gen);
  } else if (pref) {
    // The preferred entry, taken only with a margin over the entry in force (or when the
    // entry in force is masked).
    a = logits.argmax(2);
    const Action current = agents_detail::current_action(plan, m.blocks);
    auto acc = a.accessor<int64_t, 2>();
    auto p = logits.accessor<float, 3>();
    for (int b = 0; b < m.blocks; ++b) {
      const int cur = current[b];
      if (cur < 0 || cur >= m.catalog || !usable[static_cast<size_t>(b) * m.catalog + cur])
        continue;
      if (p[0][b][acc[0][b]] - p[0][b][cur] <= config_.margin) acc[0][b] = cur;
    }
    // The pipeline row: a move only with the margin over keeping the boundaries (choice 0).
    if (m.moves > 0 && p[0][m.blocks][acc[0][m.blocks]] - p[0][m.blocks][0] <= config_.margin)
      acc[0][m.blocks] = 0;
  } else {
    a = dist.mode();
  }
  if (!training_ && m.plan_row >= 0) {
    // The plan rows, in both decodings: every block of a kind takes the kind's preferred
    // entry when that beats the kind's entries in force (their mean logit in the kind's row)
    // by more than `margin` nats; the other kind keeps its blocks' own decisions. The sampled
    // policy drifts there too: a plan move goes to the entry rows' draw, then the blocks keep
    // it.
    const Action current = agents_detail::current_action(plan, m.blocks);
    auto acc = a.accessor<int64_t, 2>();
    auto p = logits.accessor<float, 3>();
    for (int kind = 0; kind < 2 && kind < m.blocks; ++kind) {
      const int row = m.plan_row + 1 + kind;
      int64_t best = 0;
      for (int k = 1; k < m.catalog; ++k)
        if (p[0][row][k] > p[0][row][best]) best = k;
      double in_force = 0;
      int n = 0;
      for (int b = kind; b < m.blocks; b += 2)  // blocks outside the catalog do not count
        if (current[b] >= 0 && current[b] < m.catalog) in_force += p[0][row][current[b]], ++n;
      // −inf: masked, move; none in the catalog: move
      if (n > 0 && p[0][row][best] - in_force / n <= config_.margin) continue;
      bool allowed = true;  // (a row with nothing allowed holds a placeholder)
      for (int b = kind; b < m.blocks && allowed; b += 2)
        allowed = usable[static_cast<size_t>(b) * m.catalog + best] != 0;
      if (!allowed) continue;
      for (int b = kind; b < m.blocks; b += 2) acc[0][b] = best;
    }
    acc[0][m.plan_row] = 0;  // the env action is the block rows, as set here
  }
  Action out = m.env_action(a.data_ptr<int64_t>());
  if (training_) {
    m.pending = true;
    m.pending_obs = obs;
    m.pending_mask = std::move(usable);
    m.pending_act.assign(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + m.rows);
    m.pending_env_act = out;
    torch::Tensor lp = dist.block_log_prob(a);
    m.pending_logp.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + m.rows);
    m.pending_value = value.item<float>();
  }
  return out;
}

void PPO::observe(const Transition& t) {
  Impl& m = *impl_;
  if (!training_ || !m.pending) return;
  m.pending = false;
  if (t.action != m.pending_env_act)
    return;  // someone else chose this step: not the policy's sample
  const bool done = t.terminated || t.truncated || t.failed;
  double reward = m.learner_reward(0, t.reward, t.failed, done);
  if (t.truncated && !t.terminated && !t.failed)
    reward += config_.gamma * m.values(t.next_obs, 1)[0];  // time limit: bootstrap
  PPORollout& b = m.buffer;
  b.obs.insert(b.obs.end(), m.pending_obs.begin(), m.pending_obs.end());
  b.mask.insert(b.mask.end(), m.pending_mask.begin(), m.pending_mask.end());
  b.act.insert(b.act.end(), m.pending_act.begin(), m.pending_act.end());
  b.logp.insert(b.logp.end(), m.pending_logp.begin(), m.pending_logp.end());
  b.value.push_back(m.pending_value);
  b.reward.push_back(static_cast<float>(reward));
  b.done.push_back(done ? 1 : 0);
  m.have_next = true;
  m.next_obs = t.next_obs;
  ++m.env_steps;
}

bool PPO::update() {
  Impl& m = *impl_;
  if (!training_ || m.buffer.rows() < config_.rollout) return false;
  const std::vector<float> next = {m.buffer.done.back() ? 0.0f : m.values(m.next_obs, 1)[0]};
  m.learn(m.buffer, next);
  m.buffer.clear();
  return true;
}

std::unique_ptr<Agent> make_ppo_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed) {
  const PPOConfig config = PPOConfig::from_id(id);
  auto ppo = std::make_unique<PPO>(spec, config, seed, id.to_string());
  if (config.polish == 0) return ppo;
  // polish=N: the plan search around it, an agent of its own (agents/polished.h).
  return std::make_unique<Polished>(std::move(ppo), spec, config.polish, config.polish_gain);
}

}  // namespace shardgym
