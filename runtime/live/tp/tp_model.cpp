// The rank's model: groups, block construction, residual-stream layouts and the forward pass.
#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>

#include "runtime/live/comm/device.h"
#include "runtime/live/tp/gemm.h"
#include "runtime/live/tp/mappings.h"
#include "runtime/live/tp/micro_batches.h"
#include "runtime/live/tp/rank_state.h"
#include "runtime/live/tp/tp_block.h"

namespace shardgym::live {
namespace {

// The group of one rank: every collective is the identity, there is no peer.
class SelfComm : public Comm {
 public:
  explicit SelfComm(int global_rank) : ranks_{global_rank} {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  std::string name() const override { return "self[" + std::to_string(ranks_[0]) + "]"; }
  void all_reduce(at::Tensor&) override {}
  at::Tensor all_gather(const at::Tensor& t, int64_t) override { return t.clone(); }
  at::Tensor reduce_scatter(const at::Tensor& t, int64_t) override { return t.clone(); }
  void broadcast(at::Tensor&, int) override {}
  void send(const at::Tensor&, int) override { throw std::logic_error(name() + ": no peer"); }
  void recv(at::Tensor&, int) override { throw std::logic_error(name() + ": no peer"); }
  void barrier() override {}

 private:
  std::vector<int> ranks_;
};

std::vector<Box> boxes_of_all_ranks(const ModelSpec& m, const Strategy& s, int world,
                                    const BatchRows& rows) {
  std::vector<Box> out;
  for (int q = 0; q < world; ++q)
    out.push_back(block_activation_box(m, place_block(s, q, world), rows));
  return out;
}

void make_exchange(const std::vector<Box>& from, const std::vector<Box>& to, const ModelSpec& m,
                   int64_t G, int rank, std::unique_ptr<ExchangePlan>& fwd,
                   std::unique_ptr<ExchangePlan>& bwd) {
  if (from == to) return;  // same layout on every rank: nothing moves
  ExchangeItem item{{G, m.seq, m.hidden}, from, to};
  fwd = std::make_unique<ExchangePlan>(std::vector<ExchangeItem>{item}, rank,
                                       static_cast<int>(from.size()));
  bwd = std::make_unique<ExchangePlan>(fwd->reversed());
}

}  // namespace

double now_s(const c10::Device& device) {
  synchronize(device);
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::vector<at::Tensor> BlockState::values() const {
  std::vector<at::Tensor> v;
  for (const auto& p : params) v.push_back(p.value);
  return v;
}

Groups::Groups(CommWorld& world) : world_(world), self_(std::make_unique<SelfComm>(world.rank())) {
  used_.insert(&world_.world());
}

Groups::~Groups() = default;

void Groups::create(std::vector<std::vector<int>> sets) {
  for (auto& s : sets) std::sort(s.begin(), s.end());
  std::sort(sets.begin(), sets.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  for (const auto& s : sets)
    if (std::binary_search(s.begin(), s.end(), world_.rank())) get(s);
}

Comm& Groups::get(const std::vector<int>& ranks) {
  Comm* c = nullptr;
  if (ranks.size() == 1 && ranks[0] == world_.rank()) c = self_.get();
  else if (static_cast<int>(ranks.size()) == world_.world_size()) c = &world_.world();
  else c = &world_.group(ranks);
  used_.insert(c);
  return *c;
}

double Groups::wait_s() const {
  double s = 0;
  for (Comm* c : used_) s += c->stats().wait_s;
  return s;
}

void RankTrainer::State::place_stage() {
  stage = rank_stage(plan, rank, world);
  stage_comm = &groups->get(stage.ranks());
  const std::vector<int> of = plan.block_stages();
  here.assign(of.size(), 0);
  for (size_t b = 0; b < of.size(); ++b) here[b] = of[b] == stage.index;
}

const LocalParam& RankTrainer::State::outer_param(const std::string& name) const {
  for (const auto& p : outer)
    if (p.shard.name == name) return p;
  throw std::logic_error("no outer parameter " + name);
}

std::vector<LocalParam*> RankTrainer::State::all_params() {
  std::vector<LocalParam*> out;
  for (auto& b : blocks)
    for (auto& p : b.params) out.push_back(&p);
  for (auto& p : outer) out.push_back(&p);
  return out;
}

std::vector<int> StageRanks::ranks() const {
  std::vector<int> out(size);
  for (int i = 0; i < size; ++i) out[i] = first + i;
  return out;
}

std::vector<int> StageRanks::global(const std::vector<int>& local) const {
  std::vector<int> out;
  out.reserve(local.size());
  for (int q : local) out.push_back(first + q);
  return out;
}

StageRanks block_stage(const Plan& plan, int b, int world) {
  const int stage = plan.block_stages().at(b);
  const int size = plan.stage_world(world);
  return StageRanks{stage, stage * size, size};
}

StageRanks rank_stage(const Plan& plan, int q, int world) {
  const int size = plan.stage_world(world);
  return StageRanks{q / size, (q / size) * size, size};
}

std::vector<std::vector<int>> plan_group_sets(const ModelSpec& m, const Plan& plan, int world) {
  const std::vector<int> active = active_ranks(plan, world);
  std::vector<std::vector<int>> sets;
  for (int b = 0; b < plan.size(); ++b) {
    const StageRanks sr = block_stage(plan, b, world);
    for (int local = 0; local < sr.size; ++local) {
      const int q = sr.first + local;
      const BlockPlacement p = place_block(plan.blocks[b], local, sr.size);
      sets.push_back(sr.global(p.g1));
      sets.push_back(sr.global(p.g2));
      if (!std::binary_search(active.begin(), active.end(), q)) continue;
      sets.push_back(only_active(sr.global(p.data), active));
      for (const auto& s : block_param_shards(m, b, p))
        sets.push_back(only_active(sr.global(grad_sum_ranks(p, s)), active));
    }
  }
  for (int q = 0; q < world; q += plan.stage_world(world))
    sets.push_back(rank_stage(plan, q, world).ranks());
  for (const ParamShard& s : outer_param_shards(m))
    sets.push_back(outer_holders(m, plan, s.name, world, active));
  sets.push_back(active);
  std::vector<int> all(world);
  for (int q = 0; q < world; ++q) all[q] = q;
  sets.push_back(all);
  return sets;
}

Box held_box(const Box& box, bool holds) {
  if (holds) return box;
  Box none = box;
  none.hi = none.lo;
  return none;
}

std::vector<ParamShard> held_param_shards(const ModelSpec& m, const Plan& plan, int b, int q,
                                          int world, const std::vector<int>& active) {
  const StageRanks sr = block_stage(plan, b, world);
  const bool here = sr.holds(q);
  std::vector<ParamShard> shards =
      block_param_shards(m, b, place_block(plan.blocks[b], here ? q - sr.first : 0, sr.size));
  const bool holds = here && std::binary_search(active.begin(), active.end(), q);
  for (ParamShard& sh : shards) sh.box = held_box(sh.box, holds);
  return shards;
}

std::vector<int> only_active(const std::vector<int>& ranks, const std::vector<int>& active) {
  std::vector<int> out;
  for (int q : ranks)
    if (std::binary_search(active.begin(), active.end(), q)) out.push_back(q);
  return out;
}

BlockState make_block(const ModelSpec& m, const Plan& plan, int b, int rank, int world,
                      Groups& groups, const std::map<std::string, at::Tensor>* full,
                      const std::vector<int>& active) {
  const StageRanks sr = block_stage(plan, b, world);
  const bool here = sr.holds(rank);
  BlockState st;
  st.ctx.model = m;
  st.ctx.block = b;
  st.ctx.place = place_block(plan.blocks[b], here ? rank - sr.first : 0, sr.size);
  // Off its stage a block is never run: its groups are this rank alone.
  st.ctx.g1 = &groups.get(here ? sr.global(st.ctx.place.g1) : std::vector<int>{rank});
  st.ctx.g2 = &groups.get(here ? sr.global(st.ctx.place.g2) : std::vector<int>{rank});
  std::vector<std::vector<ParamShard>> shards_of(world);
  for (int q = 0; q < world; ++q) shards_of[q] = held_param_shards(m, plan, b, q, world, active);
  const auto& mine = shards_of[rank];
  const bool holds = here && std::binary_search(active.begin(), active.end(), rank);
  for (size_t i = 0; i < mine.size(); ++i) {
    LocalParam lp;
    lp.shard = mine[i];
    lp.grad_sum = holds ? only_active(sr.global(grad_sum_ranks(st.ctx.place, mine[i])), active)
                        : std::vector<int>{rank};
    lp.holders = 0;
    lp.primary = holds;
    for (int q : only_active(sr.ranks(), active)) {
      if (shards_of[q][i].box != mine[i].box) continue;
      lp.holders += 1;
      if (q < rank) lp.primary = false;
    }
    lp.holders = std::max(1, lp.holders);
    if (full) {
      lp.value = box_view(full->at(lp.shard.name), lp.shard.box).clone().set_requires_grad(true);
      lp.adam = adamw_init(lp.value);
    }
    st.params.push_back(std::move(lp));
  }
  return st;
}

std::vector<int> outer_holders(const ModelSpec& m, const Plan& plan, const std::string& name,
                               int world, const std::vector<int>& active) {
  const int size = plan.stage_world(world), last = world - size;
  const bool first_stage = name == "wte" || name == "wpe";
  const bool last_stage = !first_stage || (name == "wte" && m.tied_embeddings);
  std::vector<int> ranks;
  for (int q : active)
    if ((first_stage && q < size) || (last_stage && q >= last)) ranks.push_back(q);
  return ranks;
}

std::vector<LocalParam> make_outer(const ModelSpec& m, const Plan& plan, int rank, int world,
                                   const std::map<std::string, at::Tensor>* full,
                                   const std::vector<int>& active) {
  std::vector<LocalParam> out;
  for (ParamShard s : outer_param_shards(m)) {
    const std::vector<int> holders = outer_holders(m, plan, s.name, world, active);
    const bool holds = std::binary_search(holders.begin(), holders.end(), rank);
    s.box = held_box(s.box, holds);
    LocalParam lp;
    lp.shard = s;
    lp.grad_sum = holds ? holders : std::vector<int>{rank};
    lp.holders = std::max<int>(1, static_cast<int>(holders.size()));
    lp.primary = holds && rank == holders.front();
    if (full) {
      lp.value = box_view(full->at(s.name), s.box).clone().set_requires_grad(true);
      lp.adam = adamw_init(lp.value);
    }
    out.push_back(std::move(lp));
  }
  return out;
}

const ActivationPlans& activation_plans(RankTrainer::State& st, const BatchRows& rows) {
  const int64_t G = rows.total();
  auto it = st.act_plans.find(rows);
  if (it != st.act_plans.end()) return it->second;
  // The stage's blocks over its ranks, from and back to the stage's data-parallel layout.
  const StageRanks& sr = st.stage;
  const int me = st.rank - sr.first;
  ActivationPlans ap;
  std::vector<Box> dp;
  for (int q = 0; q < sr.size; ++q)
    dp.push_back(data_parallel_activation_box(st.model, q, sr.size, rows));
  std::vector<Box> prev = dp;
  ap.into_fwd.resize(st.blocks.size());
  ap.into_bwd.resize(st.blocks.size());
  for (size_t b = 0; b < st.blocks.size(); ++b) {
    if (!st.on_stage(b)) continue;
    std::vector<Box> cur = boxes_of_all_ranks(st.model, st.plan.blocks[b], sr.size, rows);
    make_exchange(prev, cur, st.model, G, me, ap.into_fwd[b], ap.into_bwd[b]);
    prev = std::move(cur);
  }
  make_exchange(prev, dp, st.model, G, me, ap.out_fwd, ap.out_bwd);
  return st.act_plans.emplace(rows, std::move(ap)).first->second;
}

void check_batch(const RankTrainer::State& st, const at::Tensor& tokens,
                 const at::Tensor& targets) {
  const ModelSpec& m = st.model;
  if (tokens.dim() != 2 || tokens.sizes() != targets.sizes() || tokens.size(1) != m.seq ||
      tokens.scalar_type() != at::kLong || targets.scalar_type() != at::kLong) {
    std::ostringstream msg;
    msg << "rank " << st.rank << ": tokens and targets must be int64 [G, " << m.seq
        << "], got " << tokens.sizes() << " and " << targets.sizes();
    throw std::invalid_argument(msg.str());
  }
  const int stage_world = st.stage.size;
  if (st.plan.pipeline.shares.empty() && tokens.size(0) % stage_world != 0)
    throw std::invalid_argument("global batch " + std::to_string(tokens.size(0)) +
                                " is not a multiple of " + std::to_string(stage_world) +
                                (stage_world == st.world ? " ranks" : " ranks per pipeline stage"));
}

at::Tensor embed(RankTrainer::State& st, const at::Tensor& tokens) {
  at::Tensor x = at::embedding(st.outer_value("wte"), tokens);
  if (!st.model.rotary) x = x + st.outer_value("wpe").unsqueeze(0);  // rotary: in attention
  return x;
}

at::Tensor stage_forward(RankTrainer::State& st, at::Tensor x, const ActivationPlans& ap,
                         bool probes, BlockTimes* times) {
  Comm& stage = *st.stage_comm;
  for (size_t b = 0; b < st.blocks.size(); ++b) {
    if (!st.on_stage(b)) continue;
    const double t0 = times ? now_s(st.options.device) : 0, w0 = st.groups->wait_s();
    if (probes) x = backward_probe(x, &st.probe_in[b]);
    if (ap.into_fwd[b]) x = redistribute(x, *ap.into_fwd[b], *ap.into_bwd[b], stage);
    st.blocks[b].ctx.overlap = st.options.overlap_chunks;
    x = block_forward(st.blocks[b].ctx, x, st.blocks[b].values());
    if (probes) x = backward_probe(x, &st.probe_out[b]);
    if (times) {
      const double wait = st.groups->wait_s() - w0;
      times->comm_s[b] += wait;
      times->fwd_s[b] += now_s(st.options.device) - t0 - wait;
    }
  }
  if (ap.out_fwd) x = redistribute(x, *ap.out_fwd, *ap.out_bwd, stage);
  return x;
}

at::Tensor head_loss(RankTrainer::State& st, const at::Tensor& x_in, const at::Tensor& targets,
                     double mean_over) {
  const ModelSpec& m = st.model;
  at::Tensor x = m.rmsnorm ? local_rms_norm(x_in, st.outer_value("ln_f.weight"))
                           : at::layer_norm(x_in, {m.hidden}, st.outer_value("ln_f.weight"),
                                            st.outer_value("ln_f.bias"), 1e-5);
  // Tied embeddings: the LM head is wteᵀ (its gradient adds to the embedding's).
  at::Tensor logits = linear_matmul(x, m.tied_embeddings ? st.outer_value("wte").t()
                                                         : st.outer_value("lm_head.weight"));
  return at::cross_entropy_loss(logits.reshape({-1, m.vocab}), targets.reshape({-1}), {},
                                at::Reduction::Sum) /
         mean_over;
}

void reset_backward_probes(RankTrainer::State& st) {
  std::fill(st.bwd_t0.begin(), st.bwd_t0.end(), 0.0);
  std::fill(st.bwd_t1.begin(), st.bwd_t1.end(), 0.0);
  std::fill(st.bwd_w0.begin(), st.bwd_w0.end(), 0.0);
  std::fill(st.bwd_w1.begin(), st.bwd_w1.end(), 0.0);
}

void add_backward_times(RankTrainer::State& st, BlockTimes* times) {
  if (!times) return;
  for (size_t b = 0; b < st.blocks.size(); ++b) {
    const double wait = st.bwd_w1[b] - st.bwd_w0[b];
    times->bwd_s[b] += st.bwd_t1[b] - st.bwd_t0[b] - wait;
    times->comm_s[b] += wait;
  }
}

at::Tensor run_model(RankTrainer::State& st, const at::Tensor& tokens, const at::Tensor& targets,
                     bool train, BlockTimes* times, double mean_over, const BatchRows& rows) {
  check_batch(st, tokens, targets);
  if (rows.total() != tokens.size(0))
    throw std::logic_error("run_model: rows for " + std::to_string(rows.total()) +
                           " sequences, batch of " + std::to_string(tokens.size(0)));
  const ActivationPlans& ap = activation_plans(st, rows);
  const auto [r0, r1] = rows.part(st.rank, st.world, "batch over the world");
  at::Tensor tok = tokens.narrow(0, r0, r1 - r0).to(st.options.device);
  at::Tensor tgt = targets.narrow(0, r0, r1 - r0).to(st.options.device);
  at::Tensor x = stage_forward(st, embed(st, tok), ap, train && times, times);
  at::Tensor loss = head_loss(st, x, tgt, mean_over);
  if (train) {
    reset_backward_probes(st);
    loss.backward();
    add_backward_times(st, times);
  }
  return loss.detach().to(at::kDouble).reshape({1});
}

double global_loss(RankTrainer::State& st, const at::Tensor& share) {
  at::Tensor total = share.to(at::kDouble).reshape({1}).clone();
  st.groups->get(st.active).all_reduce(total);
  return total.item<double>();
}

}  // namespace shardgym::live
