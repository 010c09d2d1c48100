#include "runtime/sim/pipeline_model.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace shardgym {

double pipeline_time(const std::vector<double>& stage_micro_batch_s, int micro_batches,
                     Schedule schedule, int virtual_stages) {
  return pipeline_time(stage_micro_batch_s.data(), static_cast<int>(stage_micro_batch_s.size()),
                       micro_batches, schedule, virtual_stages);
}

double pipeline_time(const double* stage_micro_batch_s, int stages, int micro_batches,
                     Schedule schedule, int virtual_stages) {
  if (stages <= 0) return 0;
  const double slowest = *std::max_element(stage_micro_batch_s, stage_micro_batch_s + stages);
  const double sum = std::accumulate(stage_micro_batch_s, stage_micro_batch_s + stages, 0.0);
  const double v = schedule == Schedule::kInterleaved ? std::max(1, virtual_stages) : 1;
  return std::max(1, micro_batches) * slowest + (sum - slowest) / v;
}

namespace {

// One step of a stage's program in pipeline_replay: a pass (F or B of one micro-batch) or a
// batched point-to-point operation of up to two transfers the stage waits for.
struct ReplayOp {
  double seconds = 0;  // a pass; unused by a transfer operation
  int transfers = 0;   // 0: a pass
  int key[2] = {0, 0};
  bool sends[2] = {false, false};  // this stage is the transfer's sender (else its receiver)
};

}  // namespace

double pipeline_replay(const double* fwd, const double* bwd, const double* hop, int stages,
                       int micro_batches, Schedule schedule, int ranks_per_stage, int cores,
                       const double* wait_share) {
  const int p = stages, m = std::max(1, micro_batches);
  if (p <= 0) return 0;
  if (p == 1) return m * (fwd[0] + bwd[0]);
  // Transfer keys: micro-batch i's activations over boundary b (stage b to b + 1) and its
  // gradients back (b + 1 to b). Each records when its sender and its receiver posted it.
  auto fkey = [m](int b, int i) { return 2 * (b * m + i); };
  auto bkey = [m](int b, int i) { return 2 * (b * m + i) + 1; };
  std::vector<std::vector<ReplayOp>> prog(p);
  for (int s = 0; s < p; ++s) {
    std::vector<ReplayOp>& ops = prog[s];
    auto pass = [&](double t) { ops.push_back(ReplayOp{t, 0, {0, 0}, {false, false}}); };
    // One batched operation of the transfers that apply on this stage (none at the ends).
    auto transfer = [&](int k0, bool s0, bool on0, int k1 = 0, bool s1 = false, bool on1 = false) {
      ReplayOp op;
      if (on0) op.key[op.transfers] = k0, op.sends[op.transfers++] = s0;
      if (on1) op.key[op.transfers] = k1, op.sends[op.transfers++] = s1;
      if (op.transfers > 0) ops.push_back(op);
    };
    const bool first = s == 0, last = s == p - 1;
    auto recv_f = [&](int i) { transfer(first ? 0 : fkey(s - 1, i), false, !first); };
    auto send_f = [&](int i) { transfer(last ? 0 : fkey(s, i), true, !last); };
    auto recv_b = [&](int i) { transfer(last ? 0 : bkey(s, i), false, !last); };
    auto send_b = [&](int i) { transfer(first ? 0 : bkey(s - 1, i), true, !first); };
    if (schedule == Schedule::kGPipe) {
      for (int i = 0; i < m; ++i) recv_f(i), pass(fwd[s]), send_f(i);
      for (int i = 0; i < m; ++i) recv_b(i), pass(bwd[s]), send_b(i);
      continue;
    }
    // schedules.py, forward_backward_pipelining_without_interleaving.
    const int warmup = std::min(p - s - 1, m), steady = m - warmup;
    int fi = 0, bi = 0;
    for (int k = 0; k < warmup; ++k, ++fi) recv_f(fi), pass(fwd[s]), send_f(fi);
    if (steady > 0) recv_f(fi);
    for (int k = 0; k < steady; ++k, ++fi, ++bi) {
      pass(fwd[s]);
      // send_forward_recv_backward
      transfer(last ? 0 : fkey(s, fi), true, !last, last ? 0 : bkey(s, bi), false, !last);
      pass(bwd[s]);
      if (k == steady - 1) {
        send_b(bi);
      } else {  // send_backward_recv_forward
        transfer(first ? 0 : bkey(s - 1, bi), true, !first, first ? 0 : fkey(s - 1, fi + 1),
                 false, !first);
      }
    }
    for (int k = 0; k < warmup; ++k, ++bi) recv_b(bi), pass(bwd[s]), send_b(bi);
  }
  // Run every stage as far as it can; a transfer starts once both ends have posted it. With a
  // pool of `cores` shared by all ranks, passes take ranks_per_stage cores each, in the order
  // they become ready (list scheduling: a pass runs to its end once started, as a rank thread
  // under SCHED_FIFO does); transfers wait without one.
  std::vector<double> posted_send(size_t(2) * (p - 1) * m, -1.0), posted_recv(posted_send);
  std::vector<double> t(p, 0.0);
  std::vector<size_t> pc(p, 0);
  const int need = std::max(1, ranks_per_stage);
  const bool pooled = cores > 0 && cores < need * p;
  std::vector<double> free_at(pooled ? std::max(cores, need) : 0, 0.0);  // each core's
  size_t left = 0;
  for (const auto& ops : prog) left += ops.size();
  while (left > 0) {
    bool progress = false;
    int next_pass = -1;  // the stage whose pass is ready first
    for (int s = 0; s < p; ++s) {
      while (pc[s] < prog[s].size()) {
        const ReplayOp& op = prog[s][pc[s]];
        if (op.transfers == 0 && pooled) {
          if (next_pass < 0 || t[s] < t[next_pass]) next_pass = s;
          break;
        }
        double end = t[s] + op.seconds;
        bool ready = true;
        for (int j = 0; j < op.transfers; ++j) {
          const size_t k = size_t(op.key[j]);
          double& mine = op.sends[j] ? posted_send[k] : posted_recv[k];
          if (mine < 0) mine = t[s];
          const double other = op.sends[j] ? posted_recv[k] : posted_send[k];
          if (other < 0) { ready = false; continue; }
          end = std::max(end, std::max(mine, other) + hop[op.key[j] / 2 / m]);
        }
        if (!ready) break;
        t[s] = end, ++pc[s], --left, progress = true;
      }
    }
    if (!progress && next_pass >= 0) {  // transfers settled: the earliest pass takes its cores
      std::sort(free_at.begin(), free_at.end());
      const double start = std::max(t[next_pass], free_at[need - 1]);
      const double pass = prog[next_pass][pc[next_pass]].seconds;
      const double waits = wait_share ? std::clamp(wait_share[next_pass], 0.0, 1.0) : 0.0;
      for (int c = 0; c < need; ++c) free_at[c] = start + pass * (1 - waits);
      t[next_pass] = start + pass, ++pc[next_pass], --left, progress = true;
    }
    if (!progress) throw std::logic_error("pipeline_replay: the schedule deadlocks");
  }
  return *std::max_element(t.begin(), t.end());
}

double pipeline_time_with_transfers(const double* mb, const double* fwd_share, const double* hop,
                                    int stages, int micro_batches, Schedule schedule,
                                    int virtual_stages, bool overlap_p2p, int ranks_per_stage,
                                    int cores, const double* wait_share) {
  const int p = stages, m = std::max(1, micro_batches);
  if (p <= 1) return pipeline_time(mb, p, m, schedule, virtual_stages);
  if (schedule != Schedule::kInterleaved) {
    std::vector<double> fwd(p), bwd(p);
    for (int s = 0; s < p; ++s) fwd[s] = mb[s] * fwd_share[s], bwd[s] = mb[s] - fwd[s];
    return pipeline_replay(fwd.data(), bwd.data(), hop, p, m, schedule, ranks_per_stage, cores,
                           wait_share);
  }
  const double v = std::max(1, virtual_stages);
  double steady = 0, slowest = 0, sum = 0, fill = 0;
  for (int s = 0; s < p; ++s) {
    const double in = s == 0 ? hop[p - 1] : hop[s - 1], out = s == p - 1 ? hop[p - 1] : hop[s];
    const double e = v * (in + out) - (s == 0 ? in : 0) - (s == p - 1 ? out : 0);
    steady = std::max(steady, overlap_p2p ? std::max(mb[s], e) : mb[s] + e);
    slowest = std::max(slowest, mb[s]);
    sum += mb[s];
    if (s < p - 1) fill += v * hop[s];
  }
  fill += (v - 1) * hop[p - 1];
  return m * steady + (sum - slowest) / v + 2 * fill;
}

double bubble_fraction(int stages, int micro_batches, int virtual_stages) {
  const double p = stages, m = micro_batches, v = std::max(1, virtual_stages);
  return (p - 1) / (m * v + p - 1);
}

double micro_batches_in_flight(Schedule schedule, int stages, int micro_batches,
                               int virtual_stages, int stage) {
  const double m = std::max(1, micro_batches), p = stages, s = stage;
  switch (schedule) {
    case Schedule::kGPipe: return m;
    case Schedule::k1F1B: return std::min(m, p - s);
    case Schedule::kInterleaved: {
      const double v = std::max(1, virtual_stages);
      return std::min(m, (2 * (p - s - 1) + (v - 1) * p + 1) / v);
    }
  }
  return m;
}

double overlapped_exposed(double total, double window, int buckets) {
  if (total <= 0) return 0;
  return std::max(total / std::max(1, buckets), total - window);
}

}  // namespace shardgym
