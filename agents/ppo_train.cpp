// PPO on a VectorEnv, and PPO checkpoints (see ppo.h).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "agents/agent_util.h"
#include "agents/evaluate.h"
#include "agents/ppo_impl.h"
#include "env/vector_env.h"

namespace shardgym {

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
  auto env_seed = [&] {
    return static_cast<uint64_t>(at::randint(1 << 30, {1}, impl_->gen).item<int64_t>());
  };
  std::vector<Observation> obs = envs.reset(env_seed());
  std::vector<double> running(n, 0.0);
  const bool was_training = training_;
  training_ = true;
  restart_pending_ = false;
  while (result.env_steps < steps) {
    if (restart_pending_) {  // a fresh run (restart()): its own env seeds, no open episodes
      restart_pending_ = false;
      obs = envs.reset(env_seed());
      running.assign(n, 0.0);
    }
    Impl& m = *impl_;  // replaced by a restart
    PPORollout r;
    r.envs = n;
    int ended = 0;
    double ended_sum = 0;
    for (int t = 0; t < config_.rollout; ++t) {
      std::vector<std::vector<uint8_t>> masks = envs.action_masks();
      std::vector<float> flat_obs;
      std::vector<uint8_t> flat_mask;
      for (int i = 0; i < n; ++i) {
        std::vector<uint8_t> usable = m.usable_mask(obs[i], masks[i]);
        flat_obs.insert(flat_obs.end(), obs[i].begin(), obs[i].end());
        flat_mask.insert(flat_mask.end(), usable.begin(), usable.end());
      }
      torch::Tensor a, logp, value;
      {
        torch::NoGradGuard no_grad;
        torch::Tensor mask_t = m.mask_tensor(flat_mask, n);
        auto out = m.net->forward(m.obs_tensor(flat_obs, n), mask_t);
        ppo_detail::PlanDistribution dist = ppo_detail::distribution(out.first, mask_t);
        a = dist.sample(m.gen);
        logp = dist.block_log_prob(a).contiguous();
        value = out.second;
      }
      std::vector<Action> actions(n);
      for (int i = 0; i < n; ++i) actions[i] = m.env_action(a[i].data_ptr<int64_t>());
      VectorStep s = envs.step(actions);
      // Time-limit truncations bootstrap from the final observation's value (one batch).
      std::vector<int> boot;
      std::vector<float> final_flat;
      for (int i = 0; i < n; ++i)
        if (s.truncated[i] && !s.terminated[i] && s.infos[i].error.empty() &&
            !s.infos[i].measurement.oom && !s.final_obs[i].empty()) {
          boot.push_back(i);
          final_flat.insert(final_flat.end(), s.final_obs[i].begin(), s.final_obs[i].end());
        }
      std::vector<float> boot_v = boot.empty()
                                      ? std::vector<float>{}
                                      : m.values(final_flat, static_cast<int64_t>(boot.size()));
      r.obs.insert(r.obs.end(), flat_obs.begin(), flat_obs.end());
      r.mask.insert(r.mask.end(), flat_mask.begin(), flat_mask.end());
      r.act.insert(r.act.end(), a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + n * m.rows);
      for (int i = 0; i < n; ++i) {
        const bool failed = !s.infos[i].error.empty() || s.infos[i].measurement.oom;
        double reward = failed ? config_.fail_reward : s.rewards[i];
        for (size_t j = 0; j < boot.size(); ++j)
          if (boot[j] == i) reward += config_.gamma * boot_v[j];
        const bool done = s.terminated[i] || s.truncated[i] || failed;
        r.logp.insert(r.logp.end(), logp[i].data_ptr<float>(),
                      logp[i].data_ptr<float>() + m.rows);
        r.value.push_back(value[i].item<float>());
        r.reward.push_back(static_cast<float>(reward));
        r.done.push_back(done ? 1 : 0);
        running[i] += s.rewards[i];
        // Out of memory ends the episode here even if the env would go on: with a plan in
        // force that does not fit, no action is valid.
        if (failed && !s.terminated[i] && !s.truncated[i]) s.obs[i] = envs.env(i).reset().obs;
        if (done) {
          result.episode_returns.push_back(running[i]);
          ended_sum += running[i];
          ++ended;
          running[i] = 0;
        }
      }
      obs = std::move(s.obs);
      result.env_steps += n;
      m.env_steps += n;
    }
    std::vector<float> flat_next;
    for (const Observation& o : obs) flat_next.insert(flat_next.end(), o.begin(), o.end());
    PPOUpdate u = m.learn(r, m.values(flat_next, n));
    if (config_.polish > 0 && m.updates >= m.polish_next) {
      // The search plays whole episodes on env 0; its open training episode is dropped.
      m.polish_wait = polish(envs.env(0)) > 0 ? config_.polish : 2 * m.polish_wait;
      m.polish_next = m.updates + m.polish_wait;
      training_ = true;
      obs[0] = envs.env(0).reset(env_seed()).obs;
      running[0] = 0;
    }
    u.episodes = ended;
    if (ended > 0) u.mean_episode_return = ended_sum / ended;
    result.updates.push_back(u);
    if (on_update && !on_update(u)) break;
  }
  training_ = was_training;
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

bool PPO::train_vectorized(VectorEnv& envs, int64_t steps,
                           const std::function<bool(const TrainProgress&)>& on_progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto since_t0 = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  StallWatch watch(config_.restart_s);
  watch.start(0);
  restart_wall_s_.clear();
  train(envs, steps, [&](const PPOUpdate& u) {
    last_eval_ = std::numeric_limits<double>::quiet_NaN();
    // This update's notes, handed to on_progress (and dropped without one).
    std::vector<std::string> notes = std::move(notes_);
    notes_.clear();
    if (on_progress) {
      TrainProgress p;
      p.update = u.update;
      p.env_steps = u.env_steps;
      p.wall_s = since_t0();
      p.mean_episode_return = u.mean_episode_return;
      p.episodes = u.episodes;
      p.restarts = restarts();
      p.restart_wall_s = restart_wall_s_;
      p.restart_after_s = config_.restart_s;
      p.notes = std::move(notes);
      if (!on_progress(p)) return false;
    }
    // The stall clock reads after the evaluation: its time counts as training time.
    if (!std::isnan(last_eval_) && watch.observe(since_t0(), last_eval_)) {
      const double now = since_t0();
      restart(now);
      watch.start(now);
    }
    return true;
  });
  return true;
}

// What one greedy episode showed the search: per table t (0: every step; 1 + k: the steps
// under key k) and kind, held[2t + kind][e]: some block of the kind held e; allowed[2t +
// kind][f]: every block of the kind was allowed f at once at some step. And the distinct
// conditions of its steps.
struct PPO::PolishLook {
  std::vector<std::vector<uint8_t>> held, allowed;
  std::vector<std::vector<float>> conditions;
};

double PPO::greedy_return(Env& env, uint64_t seed, PolishLook* look) {
  Impl& m = *impl_;
  EpisodeHooks hooks;
  const int K = m.catalog, B = m.blocks;
  Observation before;  // the observation the step acted on: its conditions are the step's
  if (look) {
    look->held.assign(2 * (1 + m.keys()), std::vector<uint8_t>(K, 0));
    look->allowed = look->held;
    look->conditions.clear();
    hooks.on_reset = [&](const ResetResult& r) { before = r.obs; };
    hooks.on_step = [&](const StepResult& r, const EpisodeSummary&) {
      const std::vector<float> c = m.conditions(before.data());
      if (std::none_of(look->conditions.begin(), look->conditions.end(),
                       [&](const std::vector<float>& k) { return Impl::same_conditions(c, k); }))
        look->conditions.push_back(c);
      const int held_in = 1 + m.nearest_key(before.data());  // 0: no keys
      for (size_t b = 0; b < r.info.plan_indices.size(); ++b) {
        const int32_t e = r.info.plan_indices[b];
        if (e < 0 || e >= K) continue;
        look->held[b % 2][e] = 1;
        if (held_in > 0) look->held[2 * held_in + b % 2][e] = 1;
      }
      before = r.obs;
      if (r.terminated || r.truncated || r.obs.empty()) return;
      const int next_in = 1 + m.nearest_key(r.obs.data());
      const std::vector<uint8_t> mask = env.action_mask();
      for (int kind = 0; kind < 2 && kind < B; ++kind)
        for (int f = 0; f < K; ++f) {
          bool all = true;
          for (int b = kind; b < B && all; b += 2) all = mask[static_cast<size_t>(b) * K + f] != 0;
          if (!all) continue;
          look->allowed[kind][f] = 1;
          if (next_in > 0) look->allowed[2 * next_in + kind][f] = 1;
        }
    };
  }
  const EpisodeSummary s = run_episode(env, *this, seed, /*learn=*/false, hooks);
  return s.failed_steps > 0 ? -std::numeric_limits<double>::infinity() : s.total_reward;
}

namespace {

// Substitutions one search may keep in turn (each the best of its round). Two left
// seq-mix-corpus seed 0 at 0.949 of the oracle's return; rounds stop anyway when nothing
// gains.
constexpr int kPolishSteps = 4;
// Entries per kind whose pairs are tried when no single substitution gains: the best M of
// each kind's singles (not tuned: 8 × 8 = 64 episodes, about a tenth of a round's singles).
// Pairs matter where one kind moving alone loses and both together gain (seq-mix-corpus,
// docs/benchmarks.md "PPO across training seeds: plan rows").
constexpr int kPolishPairs = 8;
// Tables per condition only where an episode shows between 2 and this many distinct
// conditions (scenario phases, sequence lengths); more would be one per step.
constexpr int kPolishKeys = 8;

// Table 0 of `sub` (2 kinds × K, the table for every step) with every entry that kind's
// blocks held (held) replaced by f, wherever a decoded entry maps to it; false when nothing
// changes.
bool substituted(std::vector<int32_t>& sub, const std::vector<uint8_t>& held, int kind, int f,
                 int K) {
  bool changed = false;
  int32_t* row = sub.data() + static_cast<size_t>(kind) * K;
  for (int e = 0; e < K; ++e) {
    if (!held[e] || e == f) continue;
    for (int s = 0; s < K; ++s)
      if (row[s] == e) row[s] = f;
    row[e] = f;
    changed = true;
  }
  return changed;
}

// Table t of `sub` sending every entry of that kind to f: the plan of the kind under a key,
// whatever the policy decodes (decoding keeps the entry in force within a margin, so an
// entry-by-entry table under one key would carry a change into the next condition); false
// when it already does.
bool overridden(std::vector<int32_t>& sub, int t, int kind, int f, int K) {
  int32_t* row = sub.data() + (static_cast<size_t>(t) * 2 + kind) * K;
  if (std::all_of(row, row + K, [&](int32_t e) { return e == f; })) return false;
  std::fill(row, row + K, f);
  return true;
}

}  // namespace

int PPO::polish(Env& env) {
  Impl& m = *impl_;
  const int K = m.catalog;
  // Training seeds: far from the small integers that configs evaluate on.
  auto draw_seed = [&] {
    return (uint64_t{1} << 40) +
           static_cast<uint64_t>(at::randint(1 << 30, {1}, m.gen).item<int64_t>());
  };
  const uint64_t seed_a = draw_seed(), seed_b = draw_seed();
  auto beats = [&](double cand, double base) {
    return std::isfinite(cand) && cand > base + config_.polish_gain * std::abs(base);
  };
  PolishLook look;
  const auto t0 = std::chrono::steady_clock::now();
  int episodes = 1, kept = 0, kept_keyed = 0;
  double base = greedy_return(env, seed_a, &look);
  const double first = base;
  for (int step = 0; step < kPolishSteps; ++step) {
    std::vector<int32_t> table = m.sub;
    std::vector<int32_t> best_table;
    double best = -std::numeric_limits<double>::infinity();
    auto consider = [&](const std::vector<int32_t>& cand) {
      m.sub = cand;
      const double r = greedy_return(env, seed_a, nullptr);
      ++episodes;
      if (r > best) best = r, best_table = cand;
      return r;
    };
    // Table t's singles (one kind, every entry it holds → f), ranked per kind; then both
    // kinds → f. Table 0 applies at every step, table 1 + k where the conditions are key k's.
    std::vector<std::array<std::vector<std::pair<double, int>>, 2>> ranked(1 + kPolishKeys);
    // Table 0 substitutes the entries held; a key's table sets its kind's entry outright.
    auto change = [&](std::vector<int32_t>& cand, int t, int kind, int f) {
      return t == 0 ? substituted(cand, look.held[kind], kind, f, K)
                    : overridden(cand, t, kind, f, K);
    };
    auto singles = [&](int t) {
      for (int kind = 0; kind < 2; ++kind)
        for (int f = 0; f < K; ++f) {
          std::vector<int32_t> cand = table;
          if (look.allowed[2 * t + kind][f] && change(cand, t, kind, f))
            ranked[t][kind].emplace_back(consider(cand), f);
        }
      for (int f = 0; f < K; ++f) {
        std::vector<int32_t> cand = table;
        if (!look.allowed[2 * t][f] || !look.allowed[2 * t + 1][f]) continue;
        const bool a = change(cand, t, 0, f), b = change(cand, t, 1, f);
        if (a || b) consider(cand);
      }
    };
    // Table t's pairs of the kinds' best singles.
    auto pairs = [&](int t) {
      for (auto& r : ranked[t]) {
        std::sort(r.begin(), r.end(), std::greater<>());
        if (r.size() > kPolishPairs) r.resize(kPolishPairs);
      }
      for (const auto& [r0, f] : ranked[t][0])
        for (const auto& [r1, g] : ranked[t][1]) {
          if (f == g) continue;  // both kinds → f: tried with the singles
          std::vector<int32_t> cand = table;
          change(cand, t, 0, f);
          change(cand, t, 1, g);
          consider(cand);
        }
    };
    singles(0);
    if (!beats(best, base)) pairs(0);
    // Then a table per condition, when nothing for all steps gains: singles, then pairs.
    bool keyed = false;
    if (!beats(best, base) && m.keys() == 0 && look.conditions.size() >= 2 &&
        look.conditions.size() <= static_cast<size_t>(kPolishKeys)) {
      m.sub = table;
      m.set_keys(look.conditions);  // identity tables: the policy is unchanged
      table = m.sub;
      base = greedy_return(env, seed_a, &look);  // what each condition's steps held
      ++episodes;
    }
    if (!beats(best, base) && m.keys() > 0) {
      for (int t = 1; t <= m.keys(); ++t) singles(t);
      if (!beats(best, base))
        for (int t = 1; t <= m.keys(); ++t) pairs(t);
      keyed = true;
    }
    m.sub = table;
    if (!beats(best, base)) break;
    // The same gain on a second seed, or the table stays.
    const double base_b = greedy_return(env, seed_b, nullptr);
    m.sub = best_table;
    episodes += 2;
    if (!beats(greedy_return(env, seed_b, nullptr), base_b)) {
      m.sub = table;
      break;
    }
    base = greedy_return(env, seed_a, &look);
    ++episodes, ++kept;
    kept_keyed += keyed;
  }
  char keyed_part[80] = "";
  if (m.keys() > 0)
    std::snprintf(keyed_part, sizeof keyed_part, " (%d of them for one of %d conditions)",
                  kept_keyed, m.keys());
  char line[240];
  std::snprintf(line, sizeof line,
                "polish after update %d: %d episodes in %.1f s, %d substitution%s kept%s, greedy "
                "return %.2f -> %.2f (training seed)",
                m.updates, episodes,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kept,
                kept == 1 ? "" : "s", keyed_part, first, base);
  notes_.push_back(line);
  return kept;
}

void PPO::restart(double now_s) {
  restart_wall_s_.push_back(now_s);
  const int updates = impl_->updates;
  const int64_t env_steps = impl_->env_steps;
  impl_ = std::make_unique<Impl>(spec_, run_config(restarts()), restart_seed(seed_, restarts()));
  impl_->updates = updates;
  impl_->env_steps = env_steps;
  restart_pending_ = true;
}

PPOConfig PPO::run_config(int run) const {
  PPOConfig c = config_;
  if (c.plan_alt) c.plan = run % 2 == 1;
  return c;
}

void StallWatch::start(double now_s) {
  best_ = -std::numeric_limits<double>::infinity();
  since_ = now_s;
}

bool StallWatch::observe(double now_s, double eval_return) {
  if (std::isnan(eval_return)) return false;
  if (std::isinf(best_) || eval_return > best_ + kMinGain * std::max(std::abs(best_), 1e-9)) {
    best_ = eval_return;
    since_ = now_s;
    return false;
  }
  return restart_s_ > 0 && now_s - since_ >= restart_s_;
}

uint64_t restart_seed(uint64_t seed, int restart) {
  // splitmix64 (Steele, Lea, Flood 2014) of the seed offset by the restart count.
  uint64_t z = seed + static_cast<uint64_t>(restart) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

// Version 2 adds the plan rows' flag to the header (version 1: no plan rows, 9 entries);
// version 3 adds polish's substitution tables ("sub", "sub_keys"; earlier versions load with
// none).
constexpr int64_t kCheckpointVersion = 3;

template <typename T>
torch::Tensor vec_tensor(const std::vector<T>& v, torch::ScalarType type) {
  return torch::from_blob(const_cast<T*>(v.data()), {static_cast<int64_t>(v.size())}, type).clone();
}

template <typename T>
std::vector<T> tensor_vec(torch::serialize::InputArchive& in, const std::string& key) {
  torch::Tensor t;
  in.read(key, t);
  t = t.contiguous();
  return std::vector<T>(t.data_ptr<T>(), t.data_ptr<T>() + t.numel());
}

}  // namespace

void PPO::save(const std::string& path) const {
  const Impl& m = *impl_;
  torch::serialize::OutputArchive root, net, opt;
  m.net->save(net);
  m.optimizer->save(opt);
  root.write("net", net);
  root.write("optimizer", opt);
  root.write("generator", m.gen.get_state());
  root.write("header", torch::tensor({kCheckpointVersion, int64_t{m.blocks}, int64_t{m.catalog},
                                      int64_t{m.obs_dim}, int64_t{config_.hidden},
                                      int64_t{m.updates}, m.env_steps, int64_t{m.pending},
                                      int64_t{m.have_next}, int64_t{m.plan_row >= 0}}));
  const PPORollout& b = m.buffer;
  root.write("buf_obs", vec_tensor(b.obs, torch::kFloat32));
  root.write("buf_mask", vec_tensor(b.mask, torch::kUInt8));
  root.write("buf_act", vec_tensor(b.act, torch::kInt64));
  root.write("buf_logp", vec_tensor(b.logp, torch::kFloat32));
  root.write("buf_value", vec_tensor(b.value, torch::kFloat32));
  root.write("buf_reward", vec_tensor(b.reward, torch::kFloat32));
  root.write("buf_done", vec_tensor(b.done, torch::kUInt8));
  root.write("pending_obs", vec_tensor(m.pending_obs, torch::kFloat32));
  root.write("pending_mask", vec_tensor(m.pending_mask, torch::kUInt8));
  root.write("pending_act", vec_tensor(m.pending_act, torch::kInt64));
  root.write("pending_logp", vec_tensor(m.pending_logp, torch::kFloat32));
  root.write("pending_value", torch::tensor({m.pending_value}));
  root.write("next_obs", vec_tensor(m.next_obs, torch::kFloat32));
  root.write("sub", vec_tensor(m.sub, torch::kInt32));
  root.write("sub_keys", vec_tensor(m.key_values, torch::kFloat32));
  try {
    root.save_to(path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("ppo save: cannot write '" + path +
                             "': " + e.what_without_backtrace());
  }
}

void PPO::load(const std::string& path) {
  try {
    torch::serialize::InputArchive root, net, opt;
    root.load_from(path);
    std::vector<int64_t> h = tensor_vec<int64_t>(root, "header");
    const bool v1 = h.size() == 9 && h[0] == 1;
    if (!v1 && (h.size() != 10 || h[0] < 2 || h[0] > kCheckpointVersion))
      throw std::runtime_error("ppo load: '" + path + "' has an unknown checkpoint version");
    const bool saved_plan = !v1 && h[9] != 0;
    // plan=alt: the kept policy may come from a run of either kind; take the saved one's.
    if (config_.plan_alt && saved_plan != (impl_->plan_row >= 0))
      impl_ = std::make_unique<Impl>(spec_, run_config(saved_plan ? 1 : 0), seed_);
    Impl& m = *impl_;
    if (saved_plan != (m.plan_row >= 0))
      throw std::runtime_error(
          "ppo load: '" + path + "' was saved " + (saved_plan ? "with" : "without") +
          " plan rows; load it into ppo(plan=" + (saved_plan ? "1" : "0") + ")");
    if (h[1] != m.blocks || h[2] != m.catalog || h[3] != m.obs_dim || h[4] != config_.hidden)
      throw std::runtime_error("ppo load: '" + path + "' is for " + std::to_string(h[1]) +
                               " blocks × " + std::to_string(h[2]) + " entries, obs " +
                               std::to_string(h[3]) + ", hidden " + std::to_string(h[4]) +
                               "; this agent has " + std::to_string(m.blocks) + " × " +
                               std::to_string(m.catalog) + ", obs " + std::to_string(m.obs_dim) +
                               ", hidden " + std::to_string(config_.hidden));
    root.read("net", net);
    root.read("optimizer", opt);
    m.net->load(net);
    m.optimizer->load(opt);
    torch::Tensor g;
    root.read("generator", g);
    m.gen.set_state(g);
    m.updates = static_cast<int>(h[5]);
    m.env_steps = h[6];
    m.pending = h[7] != 0;
    m.have_next = h[8] != 0;
    PPORollout& b = m.buffer;
    b.envs = 1;
    b.obs = tensor_vec<float>(root, "buf_obs");
    b.mask = tensor_vec<uint8_t>(root, "buf_mask");
    b.act = tensor_vec<int64_t>(root, "buf_act");
    b.logp = tensor_vec<float>(root, "buf_logp");
    b.value = tensor_vec<float>(root, "buf_value");
    b.reward = tensor_vec<float>(root, "buf_reward");
    b.done = tensor_vec<uint8_t>(root, "buf_done");
    m.pending_obs = tensor_vec<float>(root, "pending_obs");
    m.pending_mask = tensor_vec<uint8_t>(root, "pending_mask");
    m.pending_act = tensor_vec<int64_t>(root, "pending_act");
    m.pending_env_act.clear();
    if (static_cast<int>(m.pending_act.size()) == m.rows)
      m.pending_env_act = m.env_action(m.pending_act.data());
    m.pending_logp = tensor_vec<float>(root, "pending_logp");
    m.pending_value = tensor_vec<float>(root, "pending_value").at(0);
    m.next_obs = tensor_vec<float>(root, "next_obs");
    m.clear_tables();
    if (h[0] >= 3) {
      std::vector<int32_t> sub = tensor_vec<int32_t>(root, "sub");
      std::vector<float> keys = tensor_vec<float>(root, "sub_keys");
      const size_t C = std::max<size_t>(1, m.cond_index.size());
      const size_t tables = 1 + keys.size() / C;
      if (keys.size() % C != 0 || sub.size() != 2 * static_cast<size_t>(m.catalog) * tables ||
          std::any_of(sub.begin(), sub.end(), [&](int32_t e) { return e < 0 || e >= m.catalog; }))
        throw std::runtime_error("ppo load: '" + path + "' has a damaged substitution table");
      m.key_values = std::move(keys);
      m.sub = std::move(sub);
    }
  } catch (const c10::Error& e) {
    throw std::runtime_error("ppo load: '" + path +
                             "' is not a readable PPO checkpoint: " + e.what_without_backtrace());
  }
}

}  // namespace shardgym
