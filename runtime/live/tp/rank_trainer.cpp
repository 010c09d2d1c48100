#include "runtime/live/tp/rank_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "runtime/live/comm/device.h"
#include "runtime/live/tp/gpt_params.h"
#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_state.h"

namespace shardgym::live {
namespace {

// Sums the gradients of `params` over their grad_sum groups: one all-reduce per distinct
// group, groups in order of first appearance (the same on every rank of a group).
void sync_grads(Groups& groups, const std::vector<LocalParam*>& params) {
  std::vector<std::vector<int>> order;
  for (const LocalParam* p : params)
    if (std::find(order.begin(), order.end(), p->grad_sum) == order.end())
      order.push_back(p->grad_sum);
  for (const auto& set : order) {
    if (set.size() <= 1) continue;
    std::vector<at::Tensor> grads;
    for (LocalParam* p : params) {
      if (p->grad_sum != set) continue;
      if (!p->value.grad().defined()) p->value.mutable_grad() = at::zeros_like(p->value);
      grads.push_back(p->value.grad());
    }
    std::vector<at::Tensor> flat_parts;
    for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    groups.get(set).all_reduce(flat);
    int64_t off = 0;
    for (auto& g : grads) {
      g.copy_(flat.narrow(0, off, g.numel()).view(g.sizes()));
      off += g.numel();
    }
  }
}

// Micro-batch i of m (micro_batches.h): slice i of every rank's rows, in rank order.
at::Tensor micro_batch(const at::Tensor& batch, const BatchRows& rows, int world, int m, int i) {
  if (m == 1) return batch;
  const int64_t G = batch.size(0), S = batch.size(1);
  if (rows.rows.size() == 1)  // even rows: the same slices as a view, without a copy
    return batch.reshape({world, m, G / (world * m), S}).select(1, i).reshape({G / m, S});
  std::vector<at::Tensor> parts;
  for (int q = 0; q < world; ++q) {
    const auto [lo, hi] = rows.part(q, world, "batch over the world");
    const int64_t n = (hi - lo) / m;
    parts.push_back(batch.narrow(0, lo + i * n, n));
  }
  return at::cat(parts);
}

}  // namespace

RankTrainer::RankTrainer(const ModelSpec& model, const Plan& plan, CommWorld& world,
                         TrainerOptions options)
    : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.model = model;
  st.plan = plan;
  st.options = options;
  st.rank = world.rank();
  st.world = world.world_size();
  if (plan.size() != model.num_blocks())
    throw std::invalid_argument("plan has " + std::to_string(plan.size()) + " blocks, model " +
                                std::to_string(model.num_blocks()));
  const std::string why = why_live_plan_invalid(model, plan, st.world);
  if (!why.empty()) throw std::invalid_argument("plan " + plan.to_string() + ": " + why);
  if (options.dtype != at::kFloat && options.dtype != at::kDouble)
    throw std::invalid_argument("RankTrainer: dtype must be float32 or float64");
  if (!options.device.is_cpu() && !options.device.is_cuda())
    throw std::invalid_argument("RankTrainer: device must be the CPU or a CUDA device, got " +
                                options.device.str());
  if (options.threads > 0) at::set_num_threads(options.threads);
  st.groups = std::make_unique<Groups>(world);
  st.groups->create(plan_group_sets(model, plan, st.world));
  auto full = init_gpt_params(model, options.dtype, options.seed);
  if (!options.device.is_cpu())
    for (auto& kv : full) kv.second = kv.second.to(options.device);
  st.active = active_ranks(plan, st.world);
  st.is_active = rank_active(plan, st.rank, st.world);
  st.place_stage();
  st.blocks.reserve(model.num_blocks());
  for (int b = 0; b < model.num_blocks(); ++b)
    st.blocks.push_back(
        make_block(model, plan, b, st.rank, st.world, *st.groups, &full, st.active));
  st.outer = make_outer(model, plan, st.rank, st.world, &full, st.active);
  const int B = model.num_blocks();
  st.bwd_t0.assign(B, 0);
  st.bwd_w0.assign(B, 0);
  st.bwd_t1.assign(B, 0);
  st.bwd_w1.assign(B, 0);
  for (int b = 0; b < B; ++b) {
    State* s = &st;
    st.probe_out.push_back([s, b] {
      s->bwd_t0[b] = now_s(s->options.device);
      s->bwd_w0[b] = s->groups->wait_s();
    });
    st.probe_in.push_back([s, b] {
      s->bwd_t1[b] = now_s(s->options.device);
      s->bwd_w1[b] = s->groups->wait_s();
    });
  }
}

RankTrainer::~RankTrainer() = default;

double RankTrainer::forward_backward(const at::Tensor& tokens, const at::Tensor& targets,
                                     BlockTimes* times, int micro_batches) {
  State& st = *state_;
  check_batch(st, tokens, targets);
  const int64_t G = tokens.size(0);
  const std::string why = why_micro_batches_invalid(st.model, st.plan, st.world, G, micro_batches);
  if (!why.empty()) throw std::invalid_argument("rank " + std::to_string(st.rank) + ": " + why);
  const size_t B = st.blocks.size();
  if (times) {
    times->fwd_s.assign(B, 0.0);
    times->bwd_s.assign(B, 0.0);
    times->comm_s.assign(B, 0.0);
    times->optimizer_s = 0;  // train_step times it after this
    times->stretch_s = 0;
  }
  for (LocalParam* p : st.all_params()) p->value.mutable_grad() = at::Tensor();
  if (!st.is_active) return std::numeric_limits<double>::quiet_NaN();  // no rows, no state
  // Every micro-batch's backward adds into the same .grad leaves (autograd accumulates).
  const double mean_over = static_cast<double>(G) * st.model.seq;
  const BatchRows rows = batch_rows(st.plan, G);
  const BatchRows micro_rows = micro_batch_rows(rows, micro_batches);
  const double start_s = st.stretch > 1 ? now_s(st.options.device) : 0;
  const double start_wait_s = st.groups->wait_s();
  at::Tensor share;
  if (st.plan.stages() > 1)
    share = run_pipeline(st, tokens, targets, micro_batches, /*train=*/true, times, mean_over);
  for (int i = 0; st.plan.stages() == 1 && i < micro_batches; ++i) {
    const at::Tensor s = run_model(st, micro_batch(tokens, rows, st.world, micro_batches, i),
                                   micro_batch(targets, rows, st.world, micro_batches, i),
                                   /*train=*/true, times, mean_over, micro_rows);
    share = i == 0 ? s : share + s;
  }
  if (st.stretch > 1) {  // an emulated straggler (set_compute_stretch)
    const double compute_s =
        now_s(st.options.device) - start_s - (st.groups->wait_s() - start_wait_s);
    const double idle_s = (st.stretch - 1) * std::max(0.0, compute_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
    if (times) {
      times->stretch_s = idle_s;
      for (size_t b = 0; b < B; ++b) {
        times->fwd_s[b] *= st.stretch;
        times->bwd_s[b] *= st.stretch;
      }
    }
  }
  for (size_t b = 0; b < B; ++b) {
    if (!st.on_stage(b)) continue;  // another stage's block
    const double t0 = times ? now_s(st.options.device) : 0, w0 = st.groups->wait_s();
    std::vector<LocalParam*> ps;
    for (auto& p : st.blocks[b].params) ps.push_back(&p);
    sync_grads(*st.groups, ps);
    if (times) {
      const double wait = st.groups->wait_s() - w0;
      times->bwd_s[b] += now_s(st.options.device) - t0 - wait;
      times->comm_s[b] += wait;
    }
  }
  std::vector<LocalParam*> outer;
  for (auto& p : st.outer) outer.push_back(&p);
  sync_grads(*st.groups, outer);
  return global_loss(st, share);
}

void RankTrainer::set_compute_stretch(double factor) {
  if (!(factor >= 1 && factor <= 100))
    throw std::invalid_argument("compute stretch must lie in [1, 100], not " +
                                std::to_string(factor));
  state_->stretch = factor;
}

void RankTrainer::optimizer_step() {
  State& st = *state_;
  const auto params = st.all_params();
  if (!st.is_active) {  // no state to update; the step count stays the trainers' (repartition)
    for (LocalParam* p : params) ++p->adam.step;
    return;
  }
  // Global norm: each element once, so a box held by k ranks counts 1/k on each.
  // Summed on the device: one host synchronisation per step, not one per parameter.
  std::vector<at::Tensor> parts;
  parts.reserve(params.size());
  for (LocalParam* p : params) {
    if (!p->value.grad().defined()) p->value.mutable_grad() = at::zeros_like(p->value);
    const at::Tensor n = p->value.grad().norm().to(at::kDouble);
    parts.push_back(n * n / static_cast<double>(p->holders));
  }
  at::Tensor sq = at::stack(parts).sum().reshape({1});
  st.groups->get(st.active).all_reduce(sq);
  const double scale = clip_coefficient(std::sqrt(sq.item<double>()), st.options.clip);
  AdamWOptions o;
  o.lr = st.options.lr;
  o.beta1 = st.options.beta1;
  o.beta2 = st.options.beta2;
  o.eps = st.options.eps;
  o.weight_decay = st.options.weight_decay;
  for (LocalParam* p : params)
    adamw_update(p->value, p->value.grad(), p->adam, o, p->shard.decay, scale);
}

double RankTrainer::train_step(const at::Tensor& tokens, const at::Tensor& targets,
                               BlockTimes* times, int micro_batches) {
  const double loss = forward_backward(tokens, targets, times, micro_batches);
  const double t0 = times ? now_s(state_->options.device) : 0;
  optimizer_step();
  synchronize(state_->options.device);  // the step ends when its GPU work has
  if (times) times->optimizer_s = now_s(state_->options.device) - t0;
  return loss;
}

double RankTrainer::eval_loss(const at::Tensor& tokens, const at::Tensor& targets) {
  c10::NoGradGuard no_grad;
  State& st = *state_;
  check_batch(st, tokens, targets);
  const int64_t G = tokens.size(0);
  const std::string why = why_micro_batches_invalid(st.model, st.plan, st.world, G, 1);
  if (!why.empty()) throw std::invalid_argument("rank " + std::to_string(st.rank) + ": " + why);
  if (!st.is_active) return std::numeric_limits<double>::quiet_NaN();
  const double mean_over = static_cast<double>(G) * st.model.seq;
  if (st.plan.stages() > 1)
    return global_loss(st, run_pipeline(st, tokens, targets, 1, /*train=*/false, nullptr,
                                        mean_over));
  return global_loss(st, run_model(st, tokens, targets, /*train=*/false, nullptr, mean_over,
                                   batch_rows(st.plan, G)));
}

namespace {

std::map<std::string, at::Tensor> gather_full(RankTrainer::State& st,
                                              at::Tensor (*pick)(const LocalParam&)) {
  std::map<std::string, const LocalParam*> by_name;
  for (LocalParam* p : st.all_params()) by_name[p->shard.name] = p;
  const auto specs = full_param_specs(st.model);
  int64_t total = 0;
  for (const auto& s : specs) total += Box::whole(s.full_shape).numel();
  at::Tensor flat = at::zeros(
      {total}, at::TensorOptions().dtype(st.options.dtype).device(st.options.device));
  std::map<std::string, at::Tensor> out;
  int64_t off = 0;
  for (const auto& s : specs) {
    const int64_t n = Box::whole(s.full_shape).numel();
    at::Tensor full = flat.narrow(0, off, n).view(s.full_shape);
    off += n;
    const LocalParam& p = *by_name.at(s.name);
    // The lowest holder writes, the others add zeros: the all-reduce is exact.
    if (p.primary) box_view(full, p.shard.box).copy_(pick(p));
    out[s.name] = full;
  }
  st.groups->world().world().all_reduce(flat);
  return out;
}

}  // namespace

std::map<std::string, at::Tensor> RankTrainer::gather_full_params() {
  c10::NoGradGuard no_grad;
  return gather_full(*state_, [](const LocalParam& p) { return p.value.detach(); });
}

std::map<std::string, at::Tensor> RankTrainer::gather_full_grads() {
  c10::NoGradGuard no_grad;
  return gather_full(*state_, [](const LocalParam& p) {
    return p.value.grad().defined() ? p.value.grad() : at::zeros_like(p.value);
  });
}

std::map<std::string, at::Tensor> RankTrainer::gather_full_optimizer_state(const std::string& which) {
  c10::NoGradGuard no_grad;
  if (which == "exp_avg")
    return gather_full(*state_, [](const LocalParam& p) { return p.adam.exp_avg; });
  if (which == "exp_avg_sq")
    return gather_full(*state_, [](const LocalParam& p) { return p.adam.exp_avg_sq; });
  throw std::invalid_argument("optimizer state '" + which + "': expected exp_avg or exp_avg_sq");
}

void RankTrainer::load_full_params(const std::map<std::string, at::Tensor>& full) {
  check_full_params(state_->model, full);
  for (LocalParam* p : state_->all_params()) {
    p->value = box_view(full.at(p->shard.name), p->shard.box)
                   .to(state_->options.device, state_->options.dtype, /*non_blocking=*/false,
                       /*copy=*/true)
                   .set_requires_grad(true);
    p->adam = adamw_init(p->value);
  }
}

std::map<std::string, at::Tensor> RankTrainer::local_params() const {
  std::map<std::string, at::Tensor> out;
  for (LocalParam* p : state_->all_params()) out[p->shard.name] = p->value.detach();
  return out;
}

int64_t RankTrainer::local_param_elements() const {
  int64_t n = 0;
  for (LocalParam* p : state_->all_params()) n += p->value.numel();
  return n;
}

int64_t RankTrainer::optimizer_step_count() const { return state_->outer.front().adam.step; }
const Plan& RankTrainer::plan() const { return state_->plan; }
int RankTrainer::rank() const { return state_->rank; }
int RankTrainer::world_size() const { return state_->world; }

}  // namespace shardgym::live
