// PlanPricer::evaluate: the iteration of one plan from the cached costs (the hot path of
// SimRun::step), its memory, and the breakdown of `shardgym cost`.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "runtime/core/cost.h"
#include "runtime/core/live_memory.h"
#include "runtime/core/placement.h"
#include "runtime/sim/layout.h"
#include "runtime/sim/pipeline_model.h"
#include "runtime/sim/plan_pricer.h"

namespace shardgym {

void PlanPricer::edge_memory(const std::vector<int>& idx, std::vector<double>& out) {
  const int p = stages_;
  // Embedding on the first stage, LM head and its fp32 logits on the last, both split over
  // the vocabulary by the tensor-parallel degree of the stage's edge block (Megatron-LM's
  // VocabParallelEmbedding and column-parallel output layer); the logits as HeadCost has them,
  // for each micro-batch in flight on the last stage.
  const int t_first = model_.vocab_parallel ? entries_[idx[0]].degree() : 1;
  const int t_last = model_.vocab_parallel ? entries_[idx[blocks_ - 1]].degree() : 1;
  if (edge_gen_ != gen_ || edge_t_[0] != t_first || edge_t_[1] != t_last) {
    const ModelSpec& mm = stage_cost_[0].model();
    const double total = double(model_.embedding_params());
    const double emb = double(model_.input_embedding_params());
    const double head_act = head().memory_bytes - total * mm.state_bytes_per_param();
    const RuntimeCalibration& cal = cost_.cluster().calibration;
    const double ms = cal.memory_state_scale, ma = cal.memory_activation_scale;
    edge_[0] = emb / t_first * mm.state_bytes_per_param(stage_world_ / t_first) * ms;
    edge_[1] = (total - emb) / t_last * mm.state_bytes_per_param(stage_world_ / t_last) * ms;
    edge_act_ = head_act * ma;
    edge_t_[0] = t_first, edge_t_[1] = t_last, edge_gen_ = gen_;
  }
  out[0] += edge_[0];
  out[p - 1] += edge_[1] + head_in_flight_ * edge_act_;
  const double base =
      cost_.cluster().calibration.memory_base_bytes + cost_.cluster().max_workspace_bytes();
  if (base != 0)
    for (int s = 0; s < p; ++s) out[s] += base;
}

void PlanPricer::live_stage_memory(const std::vector<int>& idx, std::vector<double>& out) {
  live_plan_.blocks.resize(blocks_);
  for (int b = 0; b < blocks_; ++b) live_plan_.blocks[b] = entries_[idx[b]];
  live_plan_.pipeline = pipe_;
  const std::vector<MemoryEstimate> stages =
      live_stage_memory_estimates(cost_.model(), live_plan_, world_, pipe_.micro_batches);
  out.assign(size_t(stages_), 0.0);
  const double workspace = cost_.cluster().max_workspace_bytes();
  for (size_t s = 0; s < out.size(); ++s)
    out[s] = stages[std::min(s, stages.size() - 1)].total() + workspace;
}

void PlanPricer::stage_memory(const std::vector<int>& idx, std::vector<double>& out) {
  if (model_.live_layers) return live_stage_memory(idx, out);
  out.assign(size_t(stages_), 0.0);
  edge_memory(idx, out);
  for (int b = 0; b < blocks_; ++b) {
    const int st = block_stage_[b];
    const BlockSlot& c = block(st, b & 1, idx[b]);
    const bool after_recompute = (b & 1) && recomputes_[idx[b - 1]];
    out[st] += c.state + in_flight_[st] * (after_recompute ? c.act_prev : c.act);
  }
}

void PlanPricer::stage_memory_only(const std::vector<int>& idx, std::vector<double>& out) {
  if (model_.live_layers) return live_stage_memory(idx, out);
  out.assign(size_t(stages_), 0.0);
  edge_memory(idx, out);
  for (int b = 0; b < blocks_; ++b) {
    const int st = block_stage_[b], kind = b & 1;
    const MemoryFigures m = block_memory(st, kind, idx[b]);
    const bool after_recompute = kind && recomputes_[idx[b - 1]];
    out[st] += m.state + in_flight_[st] * (after_recompute ? m.act_prev : m.act);
  }
}

double PlanPricer::memory_of(const std::vector<int>& idx) {
  stage_memory(idx, stage_scratch_);
  return *std::max_element(stage_scratch_.begin(), stage_scratch_.end());
}

void PlanPricer::sum_blocks(const std::vector<int>& idx, LogNormalNoise* noise, double m,
                            const StageSums& acc, Measurement& out, Energy& e) {
  auto draw = [noise]() { return noise ? noise->next() : 1.0; };
  for (int b = 0; b < blocks_; ++b) {
    const int kind = b & 1, st = block_stage_[b];
    const BlockSlot& c = block(st, kind, idx[b]);
    const double nc = draw(), nm = draw();
    const double fwd = c.fwd * nc, bwd = c.bwd * nc, comm = c.comm * nm;
    out.block_fwd_s[b] = m * fwd;
    out.block_bwd_s[b] = m * bwd;
    out.block_comm_s[b] = m * comm + c.grad_sync * nm;
    acc.mb[st] += fwd + bwd + comm;
    acc.waits[st] += comm;
    acc.fwd1[st] += fwd;
    acc.bwd1[st] += bwd;
    acc.sync[st] += c.grad_sync * nm;
    acc.gather[st] += c.param_gather * nm;
    acc.opt[st] += c.optimizer;
    acc.params[st] += c.params;
    acc.host[st] += c.host;
    const bool after_recompute = kind && recomputes_[idx[b - 1]];
    stage_scratch_[st] += c.state + in_flight_[st] * (after_recompute ? c.act_prev : c.act);
    e.busy_j += m * c.busy_j * nc;
    e.link_j += m * c.link_j;
    // Embedding output takes block 0's layout for free (token ids are everywhere); later
    // boundaries inside a stage, and the data-parallel LM head, move activations if the
    // layouts differ. A stage boundary sends the activations point to point instead.
    const int prev = b > 0 ? idx[b - 1] : -1;
    if (prev >= 0 && block_stage_[b - 1] == st && act_id_[prev] != act_id_[idx[b]]) {
      const TransferSlot& r = redistribution(st, prev, idx[b]);
      acc.redist[st] += r.time, e.redist_j += m * r.energy;
    }
  }
  const int p = stages_;
  if (act_id_[idx[blocks_ - 1]] != act_id_[dp_entry_]) {
    const TransferSlot& r = redistribution(p - 1, idx[blocks_ - 1], dp_entry_);
    acc.redist[p - 1] += r.time, e.redist_j += m * r.energy;
  }
}

double PlanPricer::latency_with_transfers(const StageSums& acc, int p, IterationBreakdown* bd,
                                          double& schedule_s) {
  // Point-to-point activations and their gradients between stages: every rank of a stage
  // sends its part to the same position of the next stage at once; the slowest pair sets a
  // boundary's time. hop[p − 1]: the last stage to the first (interleaved chunks wrap).
  const ModelSpec& mm = stage_cost_[0].model();  // per micro-batch (and sequence part)
  const double bytes =
      double(mm.global_batch) / stage_world_ * mm.seq * model_.hidden * dtype_bytes(model_.dtype);
  const LinkState& ls = cost_.links();
  for (int b = 0; b < p; ++b) {
    const int from = b * stage_world_, to = ((b + 1) % p) * stage_world_;
    acc.hop[b] = 0;
    for (int k = 0; k < stage_world_; ++k)
      acc.hop[b] = std::max(acc.hop[b], ls.p2p_time(from + k, to + k, bytes));
  }
  for (int s = 0; s < p; ++s) {
    const double f = acc.fwd1[s], w = acc.bwd1[s];
    acc.fwd_share[s] = f + w > 0 ? f / (f + w) : 1.0 / 3;
  }
  // Live CPU ranks share the calibration machine's cores (RuntimeCalibration::host_cores);
  // a pass holds them except while its ranks wait in collectives (pipeline_replay).
  const int cores = cost_.cluster().calibration.host_cores;
  for (int s = 0; s < p; ++s) acc.waits[s] = acc.mb[s] > 0 ? acc.waits[s] / acc.mb[s] : 0.0;
  const double latency = pipeline_time_with_transfers(
      acc.mb, acc.fwd_share, acc.hop, p, pipe_.micro_batches, pipe_.schedule, pipe_.virtual_stages,
      model_.overlap_p2p_comm, stage_world_, cores, acc.waits);
  if (bd) {  // the same schedule without transfers, for the breakdown's p2p share
    std::vector<double> none(p, 0.0);
    schedule_s = pipeline_time_with_transfers(
        acc.mb, acc.fwd_share, none.data(), p, pipe_.micro_batches, pipe_.schedule,
        pipe_.virtual_stages, model_.overlap_p2p_comm, stage_world_, cores, acc.waits);
  }
  return latency;
}

double PlanPricer::iteration_tail(const std::vector<int>& idx, const StageSums& acc, int p,
                                  double nh, IterationBreakdown* bd) {
  const HeadCost& h = head();
  // Iteration tail: the data-parallel work of the slowest stage. Megatron-LM's buckets hold
  // max(40M, 1M·DP) parameters (distributed/distributed_data_parallel.py); state / bytes per
  // parameter gives the stage's parameter count.
  // The embedding and head gradients, reduced over the replicas of the vocabulary split.
  const int t_last = model_.vocab_parallel ? entries_[idx[blocks_ - 1]].degree() : 1;
  double tail = h.grad_sync_s * nh / t_last;
  // With stages, the first holds the word embedding and the last its tied copy for the LM
  // head; after the flush their gradients are all-reduced between each such pair of ranks
  // (Megatron-LM finalize_model_grads.py, _allreduce_word_embedding_grads): V·h/t values.
  double embedding_sync = 0;
  // (A head measured by calibration has its reductions in its row: grad_sync_s is 0 then.)
  if (p > 1 && h.grad_sync_s > 0) {
    const double bytes = double(model_.vocab) * model_.hidden / t_last * model_.grad_bytes();
    const std::vector<int> pair = {0, (p - 1) * stage_world_};
    embedding_sync =
        collective_time(CollOp::kAllReduce, bytes, describe_group(pair, cost_.links())) * nh;
    tail += embedding_sync;
  }
  double tail_max = 0;
  if (bd) bd->stages.assign(p, StageTimes{});
  for (int s = 0; s < p; ++s) {
    const int buckets = std::max(1, static_cast<int>(std::ceil(acc.params[s] / 4e7)));
    const double v = pipe_.schedule == Schedule::kInterleaved ? pipe_.virtual_stages : 1;
    const double g = model_.overlap_grad_reduce
                         ? overlapped_exposed(acc.sync[s], acc.bwd1[s] / v, buckets)
                         : acc.sync[s];
    const double a = model_.overlap_param_gather
                         ? overlapped_exposed(acc.gather[s], acc.fwd1[s] / v, buckets)
                         : acc.gather[s];
    tail_max = std::max(tail_max, g + a + acc.opt[s]);
    if (bd) {
      StageTimes& st = bd->stages[s];
      st.micro_batch_s = acc.mb[s];
      st.host_s = acc.host[s] + loop_host_s(h);
      st.grad_sync_s = acc.sync[s], st.param_gather_s = acc.gather[s], st.optimizer_s = acc.opt[s];
      st.tail_s = g + a + acc.opt[s];
    }
  }
  if (bd) bd->head_sync_s = tail, bd->embedding_sync_s = embedding_sync;
  return tail + tail_max + h.iteration_s;
}

// Peak memory per rank: its stage's (an excluded share group holds no state); out of memory
// where a stage exceeds its capacity.
void PlanPricer::fill_memory(Measurement& out) {
  const int p = stages_;
  const std::vector<int>& now = pipe_.shares;
  if (p == 1) {
    out.peak_memory_bytes.assign(world_, stage_scratch_[0]);
  } else {
    out.peak_memory_bytes.resize(world_);
    for (int r = 0; r < world_; ++r) out.peak_memory_bytes[r] = stage_scratch_[r / stage_world_];
  }
  if (!now.empty()) {
    const int n = static_cast<int>(now.size()), g = stage_world_ / n;
    for (int r = 0; r < world_; ++r)
      if (now[std::min(n - 1, (r % stage_world_) / g)] == 0) out.peak_memory_bytes[r] = 0;
  }
  out.oom = false;
  for (int s = 0; s < p; ++s) out.oom = out.oom || stage_scratch_[s] > stage_capacity_[s];
}

void PlanPricer::evaluate(const std::vector<int>& idx, const std::vector<int>* from,
                          const std::vector<int>& from_stage, int from_stage_world,
                          const std::vector<int>& from_shares, LogNormalNoise* noise,
                          Measurement& out, IterationBreakdown* bd) {
  auto draw = [noise]() { return noise ? noise->next() : 1.0; };
  const HeadCost& h = head();
  const int p = stages_;
  const double m = std::max(1, pipe_.micro_batches);
  out.block_fwd_s.resize(blocks_);
  out.block_bwd_s.resize(blocks_);
  out.block_comm_s.resize(blocks_);
  // Per stage (StageSums): one micro-batch's time, the last micro-batch's backward and first
  // forward (the overlap windows), gradient / parameter / optimizer work of the iteration.
  // Peak memory per stage (stage_memory's sum, fused into the block loop).
  // host: the time the stage's host needs to issue one micro-batch (docs/design.md §4).
  // hop, fwd_share: the point-to-point transfer over each stage boundary, the forward's share
  // of each stage's micro-batch (pipeline_time_with_transfers); waits: the part of it spent
  // in collectives (the blocks' exposed exchanges and the redistributions).
  stage_acc_.assign(12 * size_t(p), 0.0);
  double* base = stage_acc_.data();
  const StageSums acc{base,         base + p,     base + 2 * p,  base + 3 * p,
                      base + 4 * p, base + 5 * p, base + 6 * p,  base + 7 * p,
                      base + 8 * p, base + 9 * p, base + 10 * p, base + 11 * p};
  stage_scratch_.assign(p, 0.0);
  edge_memory(idx, stage_scratch_);
  Energy e;
  e.link_j = h.link_energy_j * m;
  sum_blocks(idx, noise, m, acc, out, e);
  if (model_.live_layers) live_stage_memory(idx, stage_scratch_);
  const double nr = draw(), nh = draw(), np = draw();
  for (int s = 0; s < p; ++s) acc.mb[s] += acc.redist[s] * nr, acc.waits[s] += acc.redist[s] * nr;
  acc.mb[p - 1] += h.compute_s * nh;
  // A micro-batch on a stage takes at least what its host needs to issue it (the GPU waits
  // for kernels the host has not launched yet): the blocks' kernels, the embedding and head on
  // the last stage, and the framework's own work per micro-batch; how much of the issue the
  // GPU's work hides is the hosts' overlap exponent (CostModel::with_host).
  acc.host[p - 1] += h.host_s;
  const double loop = loop_host_s(h);
  for (int s = 0; s < p; ++s) acc.mb[s] = cost_.with_host(acc.mb[s], acc.host[s] + loop);
  e.busy_j += m * h.busy_energy_j * nh;
  double schedule_s =
      pipeline_time(acc.mb, p, pipe_.micro_batches, pipe_.schedule, pipe_.virtual_stages);
  double latency = p > 1 ? latency_with_transfers(acc, p, bd, schedule_s) : schedule_s;
  const double p2p_s = latency - schedule_s;
  latency += iteration_tail(idx, acc, p, nh, bd);
  if (bd) {
    bd->schedule_s = schedule_s, bd->p2p_s = p2p_s;
    bd->head_s = h.compute_s;
    bd->step_latency_s = latency;
  }

  const RepartitionSums rep =
      price_repartition(idx, from, from_stage, from_stage_world, from_shares);
  last_repartition_ = rep;
  out.step_latency_s = latency;
  out.repartition_s = rep.seconds * np;
  out.repartition_bytes = rep.bytes;
  out.repartition_peak_bytes = rep.peak_bytes;
  out.energy_j = idle_power_w_ * (latency + out.repartition_s) + e.busy_j + e.link_j + e.redist_j +
                 rep.energy_j;
  out.tokens = double(effective_global_batch(cost_.model(), world_)) * cost_.model().seq;
  fill_memory(out);
  out.ok = true;
  out.latency_source = out.memory_source = out.energy_source = "model";
}

bool PlanPricer::fits_memory(const std::vector<int>& idx) {
  stage_memory_only(idx, stage_scratch_);
  bool ok = true;
  for (size_t s = 0; s < stage_scratch_.size(); ++s)
    ok = ok && !(stage_scratch_[s] > stage_capacity_[s]);
  return ok;
}

IterationBreakdown PlanPricer::breakdown(const std::vector<int>& idx) {
  IterationBreakdown bd;
  Measurement m;
  evaluate(idx, nullptr, block_stage_, stage_world_, pipe_.shares, nullptr, m, &bd);
  const int p = stages_;
  bd.pipeline = pipe_;
  bd.bubble_fraction =
      p > 1 ? bubble_fraction(p, pipe_.micro_batches,
                              pipe_.schedule == Schedule::kInterleaved ? pipe_.virtual_stages : 1)
            : 0.0;
  bd.block_stage = block_stage_;
  stage_memory(idx, stage_scratch_);
  for (int s = 0; s < p; ++s) {
    StageTimes& st = bd.stages[s];
    st.first_rank = s * stage_world_, st.ranks = stage_world_;
    st.in_flight = in_flight_[s];
    st.peak_memory_bytes = stage_scratch_[s], st.capacity_bytes = stage_capacity_[s];
  }
  for (int b = 0; b < blocks_; ++b) {
    StageTimes& st = bd.stages[block_stage_[b]];
    if (st.blocks++ == 0) st.first_block = b;
    const int stage = block_stage_[b];
    bd.blocks.push_back(
        stage_cost_[stage].block_cost(ModelSpec::block_kind(b), entries_[idx[b]], true));
    const bool inside = b > 0 && block_stage_[b - 1] == stage;
    bd.redistribution_s.push_back(inside ? redistribution(stage, idx[b - 1], idx[b]).time : 0.0);
  }
  if (act_id_[idx[blocks_ - 1]] != act_id_[dp_entry_])
    bd.head_redistribution_s = redistribution(p - 1, idx[blocks_ - 1], dp_entry_).time;
  return bd;
}

}  // namespace shardgym
