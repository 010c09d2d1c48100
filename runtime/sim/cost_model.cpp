#include "runtime/sim/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "runtime/core/placement.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

// Exposed communication of one pass with k chunks (formula in the header).
double exposed(double comm, double compute, int k) {
  if (k <= 1) return comm;
  return comm / k + (k - 1.0) / k * std::max(0.0, comm - compute);
}

// The block's tensor-parallel collectives left exposed past its passes, each pass's exchange in
// k pieces; the backward's part hidden under the weight-gradient GEMM is not.
double tp_exposed(const BlockCost& out, int k) {
  return exposed(out.tp_comm_fwd_s, out.fwd_s, k) +
         exposed(out.tp_comm_bwd_s - out.tp_comm_bwd_hidden_s, out.bwd_s, k);
}

}  // namespace

double calibration_tokens_per_rank(const std::string& signature) {
  const std::string text = " " + signature;
  auto value = [&text](const char* key) {
    const size_t at = text.find(std::string(" ") + key + "=");
    return at == std::string::npos ? 0.0 : std::atof(text.c_str() + at + std::strlen(key) + 2);
  };
  const double world = value("world");
  return world > 0 ? value("batch") / world * value("seq") : 0.0;
}

std::string calibration_signature(const ModelSpec& m, int world) {
  std::ostringstream o;
  o << "layers=" << m.layers << " hidden=" << m.hidden << " heads=" << m.heads
    << " ffn=" << m.ffn_size() << " seq=" << m.seq << " batch=" << effective_global_batch(m, world)
    << " vocab=" << m.vocab << " dtype=" << dtype_name(m.dtype) << " flash=" << m.flash_attention
    << " world=" << world;
  // Llama's traits, only where set, so GPT calibrations written before them still match.
  if (m.kv_head_count() != m.heads) o << " kv_heads=" << m.kv_heads;
  if (m.rmsnorm) o << " rmsnorm=1";
  if (m.swiglu) o << " swiglu=1";
  if (m.rotary) o << " rotary=1";
  if (!m.linear_bias) o << " bias=0";
  if (!m.dropout) o << " dropout=0";
  return o.str();
}

namespace {

// A calibration table's row that ran a block's very shapes on each of its ranks: the same kind,
// strategy and model dimensions (calibration_signature without the layer count, the batch and
// the world), and as many sequences per rank and micro-batch, measured at another world or
// batch. A pipeline stage of P/p ranks at m micro-batches runs many of the uniform plans'
// shapes again (tp1d(t=2) on a stage of 2 ranks at m = 2 computes what it computed on 4 ranks
// at m = 1), so its compute is the measured one rather than the fitted model's.
// `signature`: calibration_signature of the block's micro-batch model and world.
const MeasuredBlock* same_shape_row(const RuntimeCalibration& rc, int kind, const Strategy& s,
                                    const std::string& signature, int world) {
  auto split = [](const std::string& sig, double& batch, int& w) {
    std::istringstream in(sig);
    std::string token, dims;
    while (in >> token) {
      if (token.rfind("batch=", 0) == 0)
        batch = std::atof(token.c_str() + 6);
      else if (token.rfind("world=", 0) == 0)
        w = std::atoi(token.c_str() + 6);
      else if (token.rfind("layers=", 0) != 0)
        dims += token + " ";
    }
    return dims;
  };
  double table_batch = 0, batch = 0;
  int table_world = 0, w = 0;
  const std::string table_dims = split(rc.model_signature, table_batch, table_world);
  if (table_world <= 0 || split(signature, batch, w) != table_dims) return nullptr;
  // The row ran this very strategy (its text is s's), over table_world ranks.
  const int row_replicas = s.replicas(table_world), replicas = s.replicas(world);
  if (row_replicas < 1 || replicas < 1 || table_batch * replicas != batch * row_replicas)
    return nullptr;
  const std::string key = s.to_string();
  for (const MeasuredBlock& b : rc.blocks)
    if (b.kind == kind && b.strategy == key) return &b;
  return nullptr;
}

}  // namespace

CostModel::CostModel(const ClusterSpec& cluster, Calibration calibration, CostTerms terms)
    : cluster_(cluster), calib_(std::move(calibration)), terms_(terms) {
  const std::string bad = cluster_.validate();
  if (!bad.empty()) throw std::invalid_argument("cluster '" + cluster_.name + "': " + bad);
  world_ = cluster_.world_size();
  rank_device_.resize(world_);
  for (int r = 0; r < world_; ++r) rank_device_[r] = cluster_.device_index_of(r);
  // The slowest host among the ranks' devices issues at the pace every rank waits for.
  for (int r = 0; r < world_; ++r) {
    const DeviceType& d = cluster_.devices[rank_device_[r]];
    host_kernel_s_ = std::max(host_kernel_s_, d.host_kernel_s);
    host_collective_s_ = std::max(host_collective_s_,
                                  d.host_collective_s >= 0 ? d.host_collective_s : d.host_kernel_s);
    host_micro_batch_s_ = std::max(host_micro_batch_s_, d.host_micro_batch_s);
    if (d.host_overlap_exponent > 0) host_overlap_ = std::min(host_overlap_, d.host_overlap_exponent);
  }
  if (cluster_.calibration.serial_host) host_overlap_ = 1;  // CPU ranks: no overlap
  cond_.link_factor.assign(cluster_.links.size(), 1.0);
  cond_.slowdown.assign(world_, 1.0);
  links_ = make_link_state(cluster_, cond_.link_factor);
}

void CostModel::set_conditions(const Conditions& c) {
  if (c.link_factor.size() != cluster_.links.size())
    throw std::invalid_argument("conditions: " + std::to_string(c.link_factor.size()) +
                                " link factors for " + std::to_string(cluster_.links.size()) +
                                " link classes");
  if (static_cast<int>(c.slowdown.size()) != world_)
    throw std::invalid_argument("conditions: " + std::to_string(c.slowdown.size()) +
                                " slowdowns for " + std::to_string(world_) + " ranks");
  if (!c.work.empty() && static_cast<int>(c.work.size()) != world_)
    throw std::invalid_argument("conditions: " + std::to_string(c.work.size()) +
                                " data shares for " + std::to_string(world_) + " ranks");
  cond_ = c;
  links_.factor = c.link_factor;
  max_work_ = c.work.empty() ? 1.0 : *std::max_element(c.work.begin(), c.work.end());
  active_ranks_ = world_;
  for (double w : c.work) active_ranks_ -= w > 0 ? 0 : 1;
}

std::vector<GroupShape> CostModel::active_group_shapes(const Strategy& s, CommAxis axis,
                                                       int context) const {
  if (active_ranks_ == world_) return group_shapes(s, axis, links_, context);
  std::vector<GroupShape> out;
  std::vector<uint8_t> seen(world_, 0);
  for (int r = 0; r < world_; ++r) {
    if (seen[r] || !(work(r) > 0)) continue;
    std::vector<int> ranks;
    for (int q : comm_group(s, axis, r, world_, context)) {
      seen[q] = 1;
      if (work(q) > 0) ranks.push_back(q);
    }
    const GroupLinks g = describe_group(ranks, links_);
    auto it =
        std::find_if(out.begin(), out.end(), [&](const GroupShape& x) { return x.links == g; });
    if (it == out.end())
      out.push_back({g, 1});
    else
      ++it->count;
  }
  return out;
}

double CostModel::moved_bytes_per_param() const {
  return cond_.model.state_bytes_per_param() - cond_.model.grad_bytes();
}

double CostModel::slowest_pass(const std::vector<PassShape>& by_pos, const std::string& kind,
                               const PassWork& w, double& busy_j) const {
  const size_t npos = by_pos.size();
  std::vector<double> per_device(cluster_.devices.size() * npos, -1);
  double slowest = 0;
  for (int r = 0; r < world_; ++r) {
    const int d = rank_device_[r];
    const size_t pos = npos == 1 ? 0 : size_t(r) % npos;
    const PassShape& ps = by_pos[pos];
    const DeviceType& dev = cluster_.devices[d];
    double& per = per_device[size_t(d) * npos + pos];
    if (per < 0) {
      const double t_dense = gemms_on(dev, ps.dense, kind);
      const double t_core = cond_.model.flash_attention
                                ? ps.core_flops / (dev.peak_flops * dev.attention_efficiency)
                                : gemms_on(dev, ps.core, kind);
      const double t_mem = terms_.memory_bound && dev.memory_bw > 0 && dev.memory_efficiency > 0
                               ? ps.mem / (dev.memory_bw * dev.memory_efficiency)
                               : 0.0;
      per = w.dense * t_dense + w.core * t_core + w.mem * t_mem;
    }
    const double t = per * cond_.slowdown[r] * work(r);
    slowest = std::max(slowest, t);
    busy_j += (dev.busy_w - dev.idle_w) * t;
  }
  return slowest;
}

double CostModel::gemms_on(const DeviceType& dev, const std::vector<Gemm>& gemms,
                           const std::string& kind, bool scaled) const {
  const int elem = dtype_bytes(cond_.model.dtype);
  const bool builtin = calib_.source() == "builtin";
  if (builtin && dev.gemm_fixed_s > 0)
    return gemm_time(gemms, dev.peak_flops * dev.gemm_efficiency, dev.memory_bw, elem, calib_,
                     dev.name, kind, dev.gemm_fixed_s);
  // The builtin table's shape efficiencies top out at 0.80; the device's gemm_efficiency
  // rescales them (a calibration file gives absolute efficiencies).
  const double peak =
      scaled && builtin ? dev.peak_flops * dev.gemm_efficiency / 0.80 : dev.peak_flops;
  return gemm_time(gemms, peak, dev.memory_bw, elem, calib_, dev.name, kind);
}

std::vector<Gemm> CostModel::block_gemms(const ModelSpec& m, BlockKind kind, const Strategy& s,
                                         int world, int pos) {
  const double b = local_batch(m, s, world), k = s.chunks;
  const double n = b * m.seq / k;  // tokens per chunk
  const double h = m.hidden, f = m.ffn_size();
  // Input-dim and output-dim shards of the in-GEMM: the mesh's d2 and d1 (strategy_family.h;
  // tp1d: 1 and t, an uneven rank's by its heads).
  const Mesh mesh = family_of(s).mesh(s);
  const double a = mesh.d2, c = mesh.d1 / head_part(s, pos);
  if (kind == BlockKind::kAttention) {
    const double heads = double(m.heads) * head_part(s, pos) / s.degree(), dh = h / m.heads;
    // The core: a part's queries against the whole sequence's keys (context parallelism).
    const double keys = double(m.full_seq());
    return {{n, h / a, double(m.qkv_width()) / c, k, k},  // QKV (3h wide without GQA)
            {n, h / c, h / a, k, k},                      // attention out
            {double(m.seq), dh, keys, b * heads},         // Q·Kᵀ per head, one kernel
            {double(m.seq), keys, dh, b * heads}};        // softmax·V per head, one kernel
  }
  return {{n, h / a, double(m.fc1_width()) / c, k, k}, {n, f / c, h / a, k, k}};  // fc1, fc2
}

void CostModel::compute_times(const std::vector<Gemm>& gemms, double flops, const std::string& kind,
                              double& slowest_s, double& busy_j) const {
  double gemm_flops = 0;
  for (const auto& g : gemms) gemm_flops += g.flops();
  std::vector<double> per_device(cluster_.devices.size(), -1);
  slowest_s = 0, busy_j = 0;
  if (flops <= 0 || gemm_flops <= 0) return;
  for (int r = 0; r < world_; ++r) {
    const int d = rank_device_[r];
    const DeviceType& dev = cluster_.devices[d];
    if (per_device[d] < 0) {
      // The GEMMs' roofline sets the device's efficiency; it applies to all the FLOPs.
      const double t = gemms_on(dev, gemms, kind, /*scaled=*/false);
      per_device[d] = t * flops / gemm_flops;
    }
    const double t = per_device[d] * cond_.slowdown[r] * work(r);
    slowest_s = std::max(slowest_s, t);
    busy_j += (dev.busy_w - dev.idle_w) * t;
  }
}

double CostModel::collectives_time(const std::vector<Collective>& cs, const Strategy& s,
                                   bool forward, double& bytes_per_rank, double& energy_j,
                                   std::vector<CollectiveCost>* detail, double* under_wgrad) const {
  std::array<std::vector<GroupShape>, kCommAxes> shapes;
  std::array<bool, kCommAxes> have{};
  const double elem = dtype_bytes(cond_.model.dtype);
  double total = 0;
  for (const auto& c : cs) {
    if (c.forward != forward) continue;
    const int ax = static_cast<int>(c.axis);
    if (!have[ax]) shapes[ax] = active_group_shapes(s, c.axis, c.group_size), have[ax] = true;
    // A tensor-parallel message carries the group's batch: the largest share's is the longest.
    const double bytes = c.elements * elem * (c.axis == CommAxis::kData ? 1.0 : max_work_);
    double t = 0;
    for (const auto& g : shapes[ax]) {
      t = std::max(t, collective_time(c.op, bytes, g.links));
      const LinkBytes lb = collective_link_bytes(c.op, bytes, g.links);
      const double e_a =
          g.links.intra_link >= 0 ? cluster_.links[g.links.intra_link].energy_per_byte : 0;
      const double e_e =
          g.links.inter_link >= 0 ? cluster_.links[g.links.inter_link].energy_per_byte : 0;
      energy_j += double(g.count) * g.links.size * (lb.intra * e_a + lb.inter * e_e);
    }
    total += t;
    if (under_wgrad && c.under_wgrad) *under_wgrad += t;
    bytes_per_rank += c.elements_sent_per_rank() * elem;
    if (detail) detail->push_back({c, c.elements_sent_per_rank() * elem, t});
  }
  return total;
}

int block_kernels(const ModelSpec& m, BlockKind kind, const Strategy& s, int collectives,
                  bool unfused_softmax) {
  // Forward: attention = LayerNorm, QKV GEMM, the core (QK^T, scale-mask-softmax, dropout, .V;
  // flash attention: one kernel), output GEMM, bias-dropout-add; MLP = LayerNorm, fc1,
  // bias-GeLU, fc2, bias-dropout-add. Backward: two GEMMs (input and weight gradient) per
  // GEMM, one kernel per elementwise one (flash: one backward kernel for the core).
  const bool attn = kind == BlockKind::kAttention;
  // PyTorch's softmax instead of the fused one: cast, scale, mask, softmax, cast back.
  const int unfused = attn && unfused_softmax && !m.flash_attention ? 4 : 0;
  // Rotary embeddings: Megatron-Core's fused RoPE, one kernel for Q and one for K, each way.
  // Without dropout the core's dropout kernel goes (forward and backward).
  const int rope = attn && m.rotary ? 2 : 0;
  const int no_dropout = attn && !m.dropout && !m.flash_attention ? 1 : 0;
  const int fwd = (attn ? (m.flash_attention ? 5 : 8 + unfused) : 5) + rope - no_dropout;
  const int bwd = (attn ? (m.flash_attention ? 7 : 12 + unfused) : 7) + rope - no_dropout;
  // `collectives` (block_collectives) already lists one per chunk and the recompute's replays.
  // Selective recomputation replays the attention core (its four kernels, without flash).
  const int replay =
      s.recompute ? fwd : (attn && s.selective && !m.flash_attention ? 4 + unfused : 0);
  const int per_chunk = fwd + bwd + replay;
  return std::max(1, s.chunks) * per_chunk + collectives;
}

std::vector<CostModel::PassShape> CostModel::pass_shapes(BlockKind kind, const Strategy& s) const {
  // The forward's GEMMs: dense ones, and (attention) the batched QKᵀ and ·V of the core; one
  // set for every rank, or one per position of an uneven tensor group (its ranks' heads differ).
  const ModelSpec& m = cond_.model;
  const double b = local_batch(m, s, world_);
  std::vector<PassShape> pass(s.uneven() ? s.degree() : 1);
  for (int i = 0; i < static_cast<int>(pass.size()); ++i) {
    const int pos = s.uneven() ? i : -1;
    PassShape& ps = pass[i];
    ps.dense = block_gemms(m, kind, s, world_, pos);
    if (kind == BlockKind::kAttention)
      ps.core.assign(ps.dense.begin() + 2, ps.dense.end()), ps.dense.resize(2);
    ps.core_flops = attention_core_flops(m, kind, b) * head_part(s, pos) / s.degree();
    ps.mem = block_memory_bound_bytes(m, kind, s, world_, pos);
  }
  return pass;
}

CostModel::PassWork CostModel::compute_passes(BlockKind kind, const Strategy& s,
                                              const std::vector<PassShape>& pass,
                                              BlockCost& out) const {
  const ModelSpec& m = cond_.model;
  const std::string name = block_kind_name(kind);
  // Pass weights: backward = 2× forward (flash's core: 2.5×, its QKᵀ recomputed); full
  // recomputation replays the forward in the backward, selective the core and its softmax.
  const double core_bwd = m.flash_attention ? 2.5 : 2.0;
  PassWork fwd_w{1, 1, 1}, bwd_w{2, core_bwd, 2};
  if (s.recompute) bwd_w = {3, core_bwd + 1, 3};
  double busy_f = 0, busy_b = 0;
  out.fwd_s = slowest_pass(pass, name, fwd_w, busy_f);
  out.bwd_s = slowest_pass(pass, name, bwd_w, busy_b);
  if (s.selective && !s.recompute && !m.flash_attention) {
    // The replay: the core and the softmax over the scores (their bytes are part of ps.mem).
    double busy_sel = 0;
    std::vector<PassShape> replay = pass;
    for (int i = 0; i < static_cast<int>(replay.size()); ++i)
      replay[i].mem = attention_score_bytes(m, kind, s, world_, s.uneven() ? i : -1);
    out.bwd_s += slowest_pass(replay, name, {0, 1, 1}, busy_sel);
    busy_b += busy_sel;
  }
  out.busy_energy_j = busy_f + busy_b;
  return bwd_w;
}

// Context parallelism's ring (plan.h @cp(c)): c − 1 steps, each under the attention of the
// chunk a rank already has, so only what outlasts the core's compute shows (the first step's
// transfer is exposed, as in `exposed` with c pieces). Each step is one more attention kernel
// each way and one send-receive per ring pass for the host to issue.
void CostModel::add_context_ring(BlockKind kind, const Strategy& s,
                                 const std::vector<PassShape>& pass, double core_bwd,
                                 BlockCost& out, std::vector<CollectiveCost>* list) const {
  const ModelSpec& m = cond_.model;
  const auto cp = block_context_collectives(m, kind, s, world_);
  if (cp.empty()) return;
  const int c = m.context_parallel;
  const std::string name = block_kind_name(kind);
  const double cp_f =
      collectives_time(cp, s, true, out.comm_bytes_per_rank, out.link_energy_j, list);
  const double cp_b =
      collectives_time(cp, s, false, out.comm_bytes_per_rank, out.link_energy_j, list);
  double busy_core = 0;  // counted in the passes already
  const double core_f = slowest_pass(pass, name, {0, 1, 0}, busy_core);
  const double core_b = slowest_pass(pass, name, {0, core_bwd, 0}, busy_core);
  out.comm_s += exposed(cp_f, core_f, c) + exposed(cp_b, core_b, c);
  out.host_s += host_kernel_s_ * 2.0 * (c - 1) + host_collective_s_ * double(c - 1) * cp.size();
}

// Per iteration: gradient reduction over the replicas with a share, in the gradients' dtype
// (64-bit: replicas × ranks passes 2^31 from 2^16 ranks on), the distributed optimizer's
// parameter gather, and the optimizer step as a memory-bound pass.
void CostModel::add_data_parallel(BlockKind kind, const Strategy& s, const BlockMemory& memory,
                                  BlockCost& out, std::vector<CollectiveCost>* list) const {
  const ModelSpec& m = cond_.model;
  const int dp = memory.dp;
  if (dp > 1) {
    const auto sync = block_grad_sync(m, kind, s, world_);
    const double scale = double(m.grad_bytes()) / dtype_bytes(m.dtype);
    std::vector<Collective> grads = sync;
    for (auto& c : grads) {
      c.elements *= scale;  // collectives_time counts elements in the model dtype
      if (m.distributed_optimizer) c.op = CollOp::kReduceScatter;
    }
    out.grad_sync_s =
        collectives_time(grads, s, false, out.comm_bytes_per_rank, out.link_energy_j, list);
    if (m.distributed_optimizer) {
      std::vector<Collective> gather = sync;
      for (auto& c : gather) c.op = CollOp::kAllGather;
      out.param_gather_s =
          collectives_time(gather, s, false, out.comm_bytes_per_rank, out.link_energy_j, list);
    }
  }
  if (terms_.memory_bound) {
    // The optimizer step (ModelSpec::optimizer_bytes_per_param) on the owned shard, and the
    // gradient buffer zeroed in full, over the memory bandwidth of the stage's slowest device.
    const double owners = m.distributed_optimizer ? dp : 1;
    double bw = 0;
    for (const auto& d : cluster_.devices)
      if (d.memory_bw > 0 && d.memory_efficiency > 0)
        bw = bw > 0 ? std::min(bw, d.memory_bw * d.memory_efficiency)
                    : d.memory_bw * d.memory_efficiency;
    if (bw > 0)
      out.optimizer_s =
          memory.params_per_rank * (m.optimizer_bytes_per_param() / owners + m.grad_bytes()) / bw;
  }
}

// A block the calibration measured (cluster.calibration): its row's times replace the
// model's; a row of the same shapes elsewhere gives the compute, with this world's collectives
// exposed past it (tp_exposed, in `pieces`).
void CostModel::apply_measured_row(BlockKind kind, const Strategy& s, double params, int pieces,
                                   BlockCost& out) const {
  const RuntimeCalibration& rc = cluster_.calibration;
  if (rc.empty()) return;
  const ModelSpec& m = cond_.model;
  double slow = 0;
  for (int r = 0; r < world_; ++r) slow = std::max(slow, cond_.slowdown[r] * work(r));
  const std::string signature = calibration_signature(m, world_);
  if (const MeasuredBlock* e = rc.find(static_cast<int>(kind), s.to_string(), signature)) {
    out.fwd_s = e->fwd_s * slow;
    out.bwd_s = e->bwd_s * slow;
    out.comm_s = e->comm_s;
    out.tp_comm_bwd_hidden_s = 0;
    out.grad_sync_s = out.param_gather_s = 0;
    out.optimizer_s = rc.optimizer_s_per_param * params;
    out.host_s = 0;  // measured: the host's time is in the row
  } else if (const MeasuredBlock* e =
                 same_shape_row(rc, static_cast<int>(kind), s, signature, world_)) {
    // The same shapes elsewhere: the measured compute, with the host's time in it; the
    // collectives and the gradient synchronisation are this world's, as modelled, exposed
    // past the measured compute.
    const double modelled = tp_exposed(out, pieces);
    out.fwd_s = e->fwd_s * slow;
    out.bwd_s = e->bwd_s * slow;
    out.comm_s += tp_exposed(out, pieces) - modelled;
    out.host_s = 0;
  }
}

double CostModel::with_host(double gpu_s, double host_s) const {
  if (host_s <= 0) return gpu_s;
  if (std::isinf(host_overlap_)) return std::max(gpu_s, host_s);
  if (host_overlap_ == 1) return gpu_s + host_s;
  const double hi = std::max(gpu_s, host_s), lo = std::min(gpu_s, host_s);
  return hi * std::pow(1 + std::pow(lo / hi, host_overlap_), 1 / host_overlap_);
}

BlockCost CostModel::block_cost(BlockKind kind, const Strategy& s, bool detail) const {
  const ModelSpec& m = cond_.model;
  BlockCost out;
  out.flops_per_rank = block_rank_flops(m, kind, s, world_);
  const std::vector<PassShape> pass = pass_shapes(kind, s);
  const PassWork bwd_w = compute_passes(kind, s, pass, out);

  auto* list = detail ? &out.collectives : nullptr;
  const auto tp = block_collectives(m, kind, s, world_);
  out.tp_comm_fwd_s =
      collectives_time(tp, s, true, out.comm_bytes_per_rank, out.link_energy_j, list);
  double async_bwd = 0;
  out.tp_comm_bwd_s =
      collectives_time(tp, s, false, out.comm_bytes_per_rank, out.link_energy_j, list, &async_bwd);
  // The input-gradient collective of the column-parallel GEMM (QKV, fc1) runs under that
  // GEMM's weight-gradient GEMM, which has the forward GEMM's FLOPs (Collective::under_wgrad).
  if (async_bwd > 0) {
    double busy_w = 0;
    std::vector<PassShape> in_gemm(pass.size());
    for (size_t i = 0; i < pass.size(); ++i) in_gemm[i].dense = {pass[i].dense[0]};
    const double wgrad = slowest_pass(in_gemm, block_kind_name(kind), {1, 0, 0}, busy_w);
    out.tp_comm_bwd_hidden_s = std::min(async_bwd, wgrad);
  }
  // The host issues the block's kernels one by one; a GPU faster than that waits (SimRun
  // bounds each stage's micro-batch by its host's time).
  bool unfused = false;  // any position of an uneven group (the slowest host sets the pace)
  for (int i = 0; i < static_cast<int>(pass.size()); ++i)
    unfused = unfused || softmax_unfused(m, s, world_, s.uneven() ? i : -1);
  out.host_s = host_kernel_s_ * block_kernels(m, kind, s, 0, unfused) +
               host_collective_s_ * static_cast<double>(tp.size());
  // Megatron-Core's TP overlap pipelines a tensor-parallel block's collectives in t pieces
  // under its GEMMs (degree 1, dp among them, has none to pipeline: max(chunks, 1) = chunks).
  const int k = m.tp_comm_overlap ? std::max(s.chunks, s.degree()) : s.chunks;
  out.comm_s = tp_exposed(out, k);
  add_context_ring(kind, s, pass, bwd_w.core, out, list);

  const BlockMemory memory = block_memory(kind, s);
  add_data_parallel(kind, s, memory, out, list);
  apply_measured_row(kind, s, memory.params_per_rank, k, out);

  out.params_per_rank = memory.params_per_rank;
  out.state_bytes = memory.state_bytes;
  out.activation_bytes = memory.activation_bytes;
  out.activation_bytes_prev_recompute = memory.activation_bytes_prev_recompute;
  return out;
}

CostModel::BlockMemory CostModel::block_memory(BlockKind kind, const Strategy& s) const {
  const ModelSpec& m = cond_.model;
  BlockMemory out;
  out.dp = std::max(1, static_cast<int>(int64_t(s.replicas(world_)) * active_ranks_ / world_));
  out.params_per_rank = rank_param_elements(m, kind, s);  // core/placement.h boxes
  out.state_bytes = m.state_bytes_per_param(out.dp) * out.params_per_rank;
  out.activation_bytes = max_work_ * block_activation_bytes(m, kind, s, world_, false);
  out.activation_bytes_prev_recompute =
      max_work_ * block_activation_bytes(m, kind, s, world_, true);
  return out;
}

double CostModel::head_compute(double n, bool conditioned, double& busy_j) const {
  const ModelSpec& m = cond_.model;
  const std::vector<Gemm> gemms = {{n, double(m.hidden), double(m.vocab), 1}};
  double t = 0;
  busy_j = 0;
  if (conditioned) {
    compute_times(gemms, 3 * gemms[0].flops(), "head", t, busy_j);
  } else {
    for (int r = 0; r < world_; ++r)
      t = std::max(t, 3 * gemms_on(cluster_.devices[rank_device_[r]], gemms, "head", false));
  }
  if (terms_.memory_bound) {
    // Cross-entropy over the logits, kernel by kernel as Megatron-Core's (unfused, the default)
    // vocab_parallel_cross_entropy runs it (core/tensor_parallel/cross_entropy.py, r0.8):
    // forward: cast to fp32 (read e, write 4), max (read 4), subtract the max in place
    // (read 4, write 4), exp in place (4 + 4), sum (4), divide in place (4 + 4): 32 B + cast;
    // backward: scale by the loss gradient in place (4 + 4), cast back (read 4, write e).
    // Per logit 40 B, and 2·(e + 4) B more when the model's dtype is not fp32.
    const double e = dtype_bytes(m.dtype);
    const double ce_bytes_per_logit = 40.0 + (e != 4 ? 2 * (e + 4) : 0.0);
    double t_ce = 0;
    for (int r = 0; r < world_; ++r) {
      const DeviceType& dev = cluster_.devices[rank_device_[r]];
      if (dev.memory_bw > 0 && dev.memory_efficiency > 0) {
        const double bw = dev.memory_bw * dev.memory_efficiency;
        const double even = ce_bytes_per_logit * n * m.vocab / bw;
        t_ce = std::max(t_ce, conditioned ? even * cond_.slowdown[r] * work(r) : even);
      }
    }
    t += t_ce;
  }
  return t;
}

HeadCost CostModel::head_cost() const {
  const ModelSpec& m = cond_.model;
  HeadCost out;
  const double seqs = double(effective_global_batch(m, world_)) / world_;
  const double n = seqs * m.seq;
  out.compute_s = head_compute(n, /*conditioned=*/true, out.busy_energy_j);
  const RuntimeCalibration& rc = cluster_.calibration;
  const bool measured = !rc.empty() && rc.model_signature == calibration_signature(m, world_);
  if (measured) {
    out.compute_s = rc.step_overhead_s, out.host_s = out.loop_host_s = 0;
  } else if (!rc.empty() && rc.serial_host) {
    // Files with a kernel time (calibration_fit.h) price small shapes physically, this head
    // included (below, per micro-batch at its own shape). Their per-step residual was fitted
    // on the table's plans, whose head it holds (a measured head is the residual: calibrate's
    // fit_step_overheads); what stays per step is the rest, once the head of the table's
    // shape (its tokens a rank, one micro-batch, its kernels' issue) is taken out of it.
    const double table_n = calibration_tokens_per_rank(rc.model_signature);
    double unused = 0;
    const double table_head = table_n > 0 ? head_compute(table_n, /*conditioned=*/false, unused) +
                                                host_kernel_s_ * kHeadKernels
                                          : 0.0;
    out.iteration_s = std::max(0.0, rc.step_overhead_s - table_head);
  }
  std::vector<int> all;  // the ranks with a data share
  all.reserve(world_);
  for (int r = 0; r < world_; ++r)
    if (work(r) > 0) all.push_back(r);
  const GroupLinks g = describe_group(all, links_);
  const double bytes = double(m.embedding_params()) * dtype_bytes(m.dtype);
  out.grad_sync_s = measured ? 0.0 : collective_time(CollOp::kAllReduce, bytes, g);
  const LinkBytes lb = collective_link_bytes(CollOp::kAllReduce, bytes, g);
  const double e_a = g.intra_link >= 0 ? cluster_.links[g.intra_link].energy_per_byte : 0;
  const double e_e = g.inter_link >= 0 ? cluster_.links[g.inter_link].energy_per_byte : 0;
  out.link_energy_j = double(all.size()) * (lb.intra * e_a + lb.inter * e_e);
  // Embedding output in the model dtype, logits kept in fp32 for the loss.
  out.memory_bytes =
      double(m.embedding_params()) * m.state_bytes_per_param() +
      max_work_ * n * (double(m.hidden) * dtype_bytes(m.dtype) + double(m.vocab) * 4.0);
  out.host_s = measured ? 0.0 : host_kernel_s_ * kHeadKernels;  // measured: in the row
  out.loop_host_s = measured ? 0.0 : host_micro_batch_s_;
  out.memory_capacity = cluster_.devices.empty() ? 0 : cluster_.device_of(0).memory_bytes;
  for (int r = 0; r < world_; ++r) {
    const DeviceType& dev = cluster_.devices[rank_device_[r]];
    out.idle_power_w += dev.idle_w;
    out.memory_capacity = std::min(out.memory_capacity, dev.memory_bytes);
  }
  return out;
}

TransferCost CostModel::redistribution(const Strategy& from, const Strategy& to) const {
  if (activation_layout_key(from) == activation_layout_key(to)) return {};
  TransferCost f = redistribution_cost(cond_.model, from, to, cluster_, links_);
  const TransferCost b = redistribution_cost(cond_.model, to, from, cluster_, links_);
  f.time_s += b.time_s;
  f.bytes += b.bytes;
  f.max_rank_bytes += b.max_rank_bytes;
  f.energy_j += b.energy_j;
  if (!cluster_.calibration.empty()) {
    f.time_s = cluster_.calibration.redistribution_scale * f.time_s +
               cluster_.calibration.redistribution_s;
  }
  return f;
}

TransferCost CostModel::repartition(BlockKind kind, const Strategy& from,
                                    const Strategy& to) const {
  return repartition_cost(cond_.model, kind, from, to, moved_bytes_per_param(), cluster_, links_);
}

}  // namespace shardgym
