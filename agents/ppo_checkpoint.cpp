// PPO's save/load: a record checkpoint (agents/checkpoint_file.h) of plain arrays, never a
// TorchScript archive (whose __setstate__ code would run at load). Every record's dtype and
// shape is checked against the network and rollout this agent's config builds before any of
// it is used; the file's size is capped by the same config (docs/robustness.md, "Checkpoints").
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "agents/checkpoint_file.h"
#include "agents/ppo_checkpoint_check.h"
#include "agents/ppo_impl.h"

namespace shardgym {
namespace {

using checkpoint::Elem;
using checkpoint::RecordFile;

using ppo_detail::kCheckpointVersion;

std::vector<int64_t> sizes_of(const torch::Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
}

void put_tensor(RecordFile& f, const std::string& name, const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  if (c.scalar_type() == torch::kFloat32) f.put(name, Elem::kF32, sizes_of(c), c.data_ptr());
  else if (c.scalar_type() == torch::kUInt8) f.put(name, Elem::kU8, sizes_of(c), c.data_ptr());
  else throw std::logic_error("ppo save: unexpected tensor type for '" + name + "'");
}

template <typename T>
void put_vec(RecordFile& f, const std::string& name, Elem t, const std::vector<T>& v) {
  f.put(name, t, {static_cast<int64_t>(v.size())}, v.data());
}

// The tensor a record holds (already checked to have `like`'s shape and type float32).
torch::Tensor tensor_of(const checkpoint::Record& r, const torch::Tensor& like) {
  torch::Tensor t = torch::empty_like(like, torch::TensorOptions().dtype(torch::kFloat32));
  std::memcpy(t.data_ptr(), r.data.data(), r.data.size());
  return t;
}

// A parameter's key in the optimizer's state: its TensorImpl's address, printed to a string in
// LibTorch 1.x and the pointer itself in LibTorch 2.x (the map's key type says which).
using AdamStateKey =
    std::decay_t<decltype(std::declval<const torch::optim::Optimizer&>().state())>::key_type;

template <typename Key>
Key state_key(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << impl;
    return s.str();
  } else {
    return impl;
  }
}

AdamStateKey adam_key(const torch::Tensor& p) {
  return state_key<AdamStateKey>(p.unsafeGetTensorImpl());
}

bool is_zip(const std::string& bytes) { return bytes.rfind(std::string("PK\x03\x04", 4), 0) == 0; }

}  // namespace

// The layout this agent's config builds (the saved run's, under plan=alt: `m`).
ppo_detail::CheckpointLayout PPO::checkpoint_layout(const Impl& m) const {
  const int rollout = config_.rollout, hidden = config_.hidden;
  ppo_detail::CheckpointLayout l;
  l.blocks = m.blocks;
  l.catalog = m.catalog;
  l.moves = m.moves;
  l.obs_dim = m.obs_dim;
  l.rows = m.rows;
  l.plan_row = m.plan_row;
  l.hidden = hidden;
  l.rollout = rollout;
  l.conditions = m.conditions;
  for (const auto& kv : m.net->named_parameters()) l.params.emplace_back(kv.key(), sizes_of(kv.value()));
  l.generator_bytes = m.gen.get_state().numel();
  return l;
}

// For the caps only: plan=alt may load either kind of run, and the one with plan rows is the
// larger (three more rows, the entry rows' layer pi_plan: 2K outputs from the conditions).
// Building that run's Impl would reseed LibTorch's global generator, so it is bounded here.
ppo_detail::CheckpointLayout PPO::largest_checkpoint_layout() const {
  ppo_detail::CheckpointLayout l = checkpoint_layout(*impl_);
  if (!config_.plan_alt || impl_->plan_row >= 0) return l;
  const int64_t outputs = 2 * static_cast<int64_t>(l.catalog);
  l.rows += 3;
  l.params.push_back({"pi_plan.weight", {outputs, static_cast<int64_t>(l.conditions) + 2}});
  l.params.push_back({"pi_plan.bias", {outputs}});
  return l;
}

size_t PPO::max_checkpoint_bytes() const { return largest_checkpoint_layout().max_bytes(); }

std::string PPO::save_bytes() const {
  const Impl& m = *impl_;
  if (m.buffer.rows() > config_.rollout)
    throw std::runtime_error("ppo save: the rollout holds more than rollout=" +
                             std::to_string(config_.rollout) + " steps (call update() first)");
  RecordFile f;
  f.kind = ppo_detail::kCheckpointKind;
  const std::vector<int64_t> header = {kCheckpointVersion, m.blocks, m.catalog, m.obs_dim,
                                       config_.hidden, m.updates, m.env_steps, m.pending,
                                       m.have_next, m.plan_row >= 0};
  put_vec(f, "header", Elem::kI64, header);
  std::map<std::string, const torch::Tensor*> by_key;
  for (const auto& kv : m.net->named_parameters()) {
    put_tensor(f, "net/" + kv.key(), kv.value());
    auto it = m.optimizer->state().find(adam_key(kv.value()));
    if (it == m.optimizer->state().end()) continue;
    const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
    const std::vector<int64_t> step = {st.step()};
    put_vec(f, "adam/" + kv.key() + "/step", Elem::kI64, step);
    put_tensor(f, "adam/" + kv.key() + "/exp_avg", st.exp_avg());
    put_tensor(f, "adam/" + kv.key() + "/exp_avg_sq", st.exp_avg_sq());
  }
  put_tensor(f, "generator", m.gen.get_state());
  const PPORollout& b = m.buffer;
  put_vec(f, "buf_obs", Elem::kF32, b.obs);
  put_vec(f, "buf_mask", Elem::kU8, b.mask);
  put_vec(f, "buf_act", Elem::kI64, b.act);
  put_vec(f, "buf_logp", Elem::kF32, b.logp);
  put_vec(f, "buf_value", Elem::kF32, b.value);
  put_vec(f, "buf_reward", Elem::kF32, b.reward);
  put_vec(f, "buf_done", Elem::kU8, b.done);
  put_vec(f, "pending_obs", Elem::kF32, m.pending_obs);
  put_vec(f, "pending_mask", Elem::kU8, m.pending_mask);
  put_vec(f, "pending_act", Elem::kI64, m.pending_act);
  put_vec(f, "pending_logp", Elem::kF32, m.pending_logp);
  put_vec(f, "pending_value", Elem::kF32, std::vector<float>{m.pending_value});
  put_vec(f, "next_obs", Elem::kF32, m.next_obs);
  const ReturnScale& rs = m.reward_scale;
  const double scale[4] = {rs.mean, rs.var, rs.count, rs.ret.empty() ? 0.0 : rs.ret[0]};
  std::vector<int64_t> scale_bits(4);
  std::memcpy(scale_bits.data(), scale, sizeof(scale));
  put_vec(f, "reward_scale", Elem::kI64, scale_bits);
  return f.encode();
}

void PPO::load_bytes(const std::string& bytes, const std::string& where) {
  if (is_zip(bytes))
    throw std::runtime_error(where +
                             " is a TorchScript archive (a PPO checkpoint of an earlier "
                             "ShardGym). Such archives can run code when loaded, so they are "
                             "refused; train again to get a checkpoint in the current format");
  try {
    load_records(RecordFile::decode(bytes, where,
                                    largest_checkpoint_layout().max_records()),
                 where);
  } catch (const c10::Error& e) {
    throw std::runtime_error(where + " is not a readable PPO checkpoint: " +
                             e.what_without_backtrace());
  }
}

void PPO::load_records(const RecordFile& f, const std::string& where) {
  const bool saved_plan = ppo_detail::checkpoint_has_plan_rows(f, where);
  // plan=alt: the kept policy may come from a run of either kind; take the saved one's.
  std::unique_ptr<Impl> fresh;
  if (config_.plan_alt && saved_plan != (impl_->plan_row >= 0))
    fresh = std::make_unique<Impl>(spec_, run_config(saved_plan ? 1 : 0), seed_);
  Impl& m = fresh ? *fresh : *impl_;
  const ppo_detail::CheckpointContents c =
      ppo_detail::check_checkpoint(f, checkpoint_layout(m), where);
  const torch::Tensor gen_like = m.gen.get_state();
  torch::Tensor gen_state = torch::empty_like(gen_like);
  std::memcpy(gen_state.data_ptr(), c.generator->data.data(), c.generator->data.size());
  at::Generator probe = at::detail::createCPUGenerator(0);
  probe.set_state(gen_state);  // throws (c10::Error) on a state the generator refuses

  // Everything checked: install it.
  std::vector<torch::Tensor> params;
  for (const auto& kv : m.net->named_parameters()) params.push_back(kv.value());
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(tensor_of(*c.params[i], params[i]));
  }
  m.optimizer->state().clear();
  for (const auto& mo : c.moments) {
    const torch::Tensor& p = params[mo.param];
    auto st = std::make_unique<torch::optim::AdamParamState>();
    st->step(mo.step);
    st->exp_avg(tensor_of(*mo.avg, p));
    st->exp_avg_sq(tensor_of(*mo.sq, p));
    m.optimizer->state()[adam_key(p)] = std::move(st);
  }
  m.gen.set_state(gen_state);
  m.updates = c.updates;
  m.env_steps = c.env_steps;
  m.pending = c.pending;
  m.have_next = c.have_next;
  PPORollout& b = m.buffer;
  b.envs = 1;
  b.obs = c.obs;
  b.mask = c.mask;
  b.act = c.act;
  b.logp = c.logp;
  b.value = c.value;
  b.reward = c.reward;
  b.done = c.done;
  m.pending_obs = c.pending_obs;
  m.pending_mask = c.pending_mask;
  m.pending_act = c.pending_act;
  m.pending_env_act.clear();
  if (static_cast<int>(m.pending_act.size()) == m.rows)
    m.pending_env_act = m.env_action(m.pending_act.data());
  m.pending_logp = c.pending_logp;
  m.pending_value = c.pending_value;
  m.next_obs = c.next_obs;
  m.reward_scale = ReturnScale{};
  if (!c.reward_scale.empty()) {
    m.reward_scale.mean = c.reward_scale[0];
    m.reward_scale.var = c.reward_scale[1];
    m.reward_scale.count = c.reward_scale[2];
    m.reward_scale.ret = {c.reward_scale[3]};
  }
  if (fresh) impl_ = std::move(fresh);
}

}  // namespace shardgym
