#include "agents/ppo_checkpoint_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace shardgym::ppo_detail {
namespace {

using checkpoint::Elem;
using checkpoint::Record;
using checkpoint::RecordFile;

std::vector<int64_t> header_of(const RecordFile& f, const std::string& where) {
  if (f.kind != kCheckpointKind)
    throw std::runtime_error(where + " holds a '" + f.kind + "' checkpoint, not a PPO one");
  std::vector<int64_t> h = f.vec<int64_t>("header", Elem::kI64, 10, where);
  if (h.size() != 10 || h[0] != kCheckpointVersion)
    throw std::runtime_error(where + " has an unknown checkpoint version");
  if (h[5] < 0 || h[5] > std::numeric_limits<int>::max() || h[6] < 0 || (h[7] != 0 && h[7] != 1) ||
      (h[8] != 0 && h[8] != 1) || (h[9] != 0 && h[9] != 1))
    throw std::runtime_error(where + " has an impossible header (counts or flags)");
  return h;
}

}  // namespace

size_t CheckpointLayout::max_bytes() const {
  size_t params_numel = 0;
  for (const auto& [name, shape] : params) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    params_numel += n;
  }
  const size_t mask = static_cast<size_t>(blocks) * catalog + moves;
  const size_t row = static_cast<size_t>(obs_dim) * 4 + mask + static_cast<size_t>(rows) * 12 + 9;
  // Parameters with Adam's two moments; the rollout (at most `rollout` rows, PPO::update);
  // the pending step and next observation; the generator; names and headers.
  return params_numel * 12 + static_cast<size_t>(std::max(1, rollout)) * row + 2 * row +
         static_cast<size_t>(obs_dim) * 4 + static_cast<size_t>(generator_bytes) +
         max_records() * 128 + 4096;
}

bool checkpoint_has_plan_rows(const RecordFile& f, const std::string& where) {
  return header_of(f, where)[9] != 0;
}

namespace {

// Record `name` as at most `max` finite floats.
std::vector<float> finite_floats(const RecordFile& f, const std::string& name, int64_t max,
                                 const std::string& where) {
  std::vector<float> v = f.vec<float>(name, Elem::kF32, max, where);
  checkpoint::require_finite(f.records.at(name), name, where);
  return v;
}

// The network's parameters and, where saved, their Adam moments.
void read_network(const RecordFile& f, const CheckpointLayout& l, const std::string& where,
                  CheckpointContents& c) {
  for (size_t i = 0; i < l.params.size(); ++i) {
    const auto& [key, shape] = l.params[i];
    const std::string name = "net/" + key;
    const Record& r = f.get(name, Elem::kF32, shape, where);
    checkpoint::require_finite(r, name, where);
    c.params.push_back(&r);
    const std::string a = "adam/" + key + "/";
    if (!f.has(a + "step")) continue;
    const std::vector<int64_t> step = f.vec<int64_t>(a + "step", Elem::kI64, 1, where);
    if (step.size() != 1 || step[0] < 1)
      throw std::runtime_error(where + ": record '" + a + "step' is not a positive count");
    const Record& avg = f.get(a + "exp_avg", Elem::kF32, shape, where);
    const Record& sq = f.get(a + "exp_avg_sq", Elem::kF32, shape, where);
    checkpoint::require_finite(avg, a + "exp_avg", where);
    checkpoint::require_finite(sq, a + "exp_avg_sq", where);
    c.moments.push_back({i, step[0], &avg, &sq});
  }
}

// norm_reward's statistics, saved as the bits of four doubles (exact): finite, a variance
// >= 0 and a count > 0. Absent (a checkpoint from before they were saved): empty.
std::vector<double> read_reward_scale(const RecordFile& f, const std::string& where) {
  if (!f.has("reward_scale")) return {};
  const std::vector<int64_t> bits = f.vec<int64_t>("reward_scale", Elem::kI64, 4, where);
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(&v[i], &bits[i], sizeof(double));
  if (v.size() != 4 || !std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }) ||
      !(v[1] >= 0) || !(v[2] > 0))
    throw std::runtime_error(where + " has damaged reward statistics (record 'reward_scale')");
  return v;
}

}  // namespace

CheckpointContents check_checkpoint(const RecordFile& f, const CheckpointLayout& l,
                                    const std::string& where) {
  const std::vector<int64_t> h = header_of(f, where);
  const bool saved_plan = h[9] != 0;
  if (saved_plan != (l.plan_row >= 0))
    throw std::runtime_error(where + " was saved " + (saved_plan ? "with" : "without") +
                             " plan rows; load it into ppo(plan=" + (saved_plan ? "1" : "0") + ")");
  if (h[1] != l.blocks || h[2] != l.catalog || h[3] != l.obs_dim || h[4] != l.hidden)
    throw std::runtime_error(
        where + " is for " + std::to_string(h[1]) + " blocks × " + std::to_string(h[2]) +
        " entries, obs " + std::to_string(h[3]) + ", hidden " + std::to_string(h[4]) +
        "; this agent has " + std::to_string(l.blocks) + " × " + std::to_string(l.catalog) +
        ", obs " + std::to_string(l.obs_dim) + ", hidden " + std::to_string(l.hidden));
  CheckpointContents c;
  c.updates = static_cast<int>(h[5]);
  c.env_steps = h[6];
  c.pending = h[7] != 0;
  c.have_next = h[8] != 0;

  read_network(f, l, where, c);
  c.generator = &f.get("generator", Elem::kU8, {l.generator_bytes}, where);

  const int64_t rollout = std::max(1, l.rollout), D = l.obs_dim, R = l.rows;
  const int64_t mask_w = static_cast<int64_t>(l.blocks) * l.catalog + l.moves;
  auto floats = [&](const std::string& name, int64_t max) {
    return finite_floats(f, name, max, where);
  };
  c.value = floats("buf_value", rollout);
  const int64_t n = static_cast<int64_t>(c.value.size());
  c.obs = floats("buf_obs", n * D);
  c.mask = f.vec<uint8_t>("buf_mask", Elem::kU8, n * mask_w, where);
  c.act = f.vec<int64_t>("buf_act", Elem::kI64, n * R, where);
  c.logp = floats("buf_logp", n * R);
  c.reward = floats("buf_reward", n);
  c.done = f.vec<uint8_t>("buf_done", Elem::kU8, n, where);
  if (static_cast<int64_t>(c.obs.size()) != n * D ||
      static_cast<int64_t>(c.mask.size()) != n * mask_w ||
      static_cast<int64_t>(c.act.size()) != n * R || static_cast<int64_t>(c.logp.size()) != n * R ||
      static_cast<int64_t>(c.reward.size()) != n || static_cast<int64_t>(c.done.size()) != n)
    throw std::runtime_error(where + ": the rollout's arrays disagree on its length");
  // The range of each row of an action (PPO::Impl: blocks, pipeline, plan move, entry rows).
  auto row_limit = [&](int64_t r) -> int64_t {
    if (r < l.blocks) return l.catalog;
    if (l.moves > 0 && r == l.blocks) return l.moves;
    if (r == l.plan_row) return 2;
    return l.catalog;
  };
  auto check_act = [&](const std::vector<int64_t>& act, const char* name) {
    for (size_t i = 0; i < act.size(); ++i)
      if (act[i] < 0 || act[i] >= row_limit(static_cast<int64_t>(i) % R))
        throw std::runtime_error(where + ": record '" + name + "' holds an entry out of range");
  };
  check_act(c.act, "buf_act");
  c.pending_obs = floats("pending_obs", D);
  c.pending_logp = floats("pending_logp", R);
  c.next_obs = floats("next_obs", D);
  const std::vector<float> pending_value = floats("pending_value", 1);
  c.pending_mask = f.vec<uint8_t>("pending_mask", Elem::kU8, mask_w, where);
  c.pending_act = f.vec<int64_t>("pending_act", Elem::kI64, R, where);
  check_act(c.pending_act, "pending_act");
  // A pending step or next observation is whole; otherwise its arrays are whole or empty.
  auto whole = [&](size_t got, int64_t want, bool required) {
    return static_cast<int64_t>(got) == want || (!required && got == 0);
  };
  if (!whole(c.pending_obs.size(), D, c.pending) ||
      !whole(c.pending_mask.size(), mask_w, c.pending) ||
      !whole(c.pending_act.size(), R, c.pending) || !whole(c.pending_logp.size(), R, c.pending) ||
      pending_value.size() != 1 || !whole(c.next_obs.size(), D, c.have_next))
    throw std::runtime_error(where + ": the pending step's arrays do not fit this agent's config");
  c.pending_value = pending_value[0];

  c.reward_scale = read_reward_scale(f, where);
  return c;
}

}  // namespace shardgym::ppo_detail
