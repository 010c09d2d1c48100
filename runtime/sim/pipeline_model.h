// Pipeline schedules: how long an iteration of m micro-batches takes over p stages, and how
// many micro-batches' activations each stage holds at its peak (docs/design.md §4).
//
// With C_s the time of one micro-batch's forward + backward on stage s (its p2p transfers
// excluded; pipeline_time_with_transfers adds them), the schedules of Narayanan et al. 2021 ("Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", §2.2) take
//   GPipe, 1F1B:           T = m·max_s C_s + (Σ_s C_s − max_s C_s)
//   interleaved, v chunks: T = m·max_s C_s + (Σ_s C_s − max_s C_s) / v
// so with equal stages the bubble is (p−1)/(m·v + p − 1) of the iteration: (p−1)/(m+p−1) for
// 1F1B. The slowest stage sets the pace; the others add their share of the fill and drain.
//
// Activations in flight on stage s (0-based) at its peak, in units of one micro-batch of the
// stage's layers (Korthikanti et al. 2022, §4.2.3; Megatron-LM schedules.py warm-up counts):
//   GPipe m;  1F1B min(m, p − s);
//   interleaved min(m, (2(p − s − 1) + (v − 1)·p + 1) / v)   (stage 0: p + (p − 1)/v).
#pragma once

#include <vector>

#include "runtime/core/plan.h"

namespace shardgym {

double pipeline_time(const double* stage_micro_batch_s, int stages, int micro_batches,
                     Schedule schedule, int virtual_stages);
double pipeline_time(const std::vector<double>& stage_micro_batch_s, int micro_batches,
                     Schedule schedule, int virtual_stages);
// One iteration of GPipe or 1F1B replayed op by op in the order Megatron-LM's schedules.py
// runs it (forward_backward_pipelining_without_interleaving: min(p − s − 1, m) warm-up
// forwards on stage s, then one forward and one backward per step, then the cool-down
// backwards; GPipe: every forward, then every backward), waiting on each batched transfer as
// p2p_communication.py does (a send and a receive posted together; the stage goes on when
// both are done). A transfer starts once its sender and its receiver have posted it and takes
// hop[b] over boundary b (stage b to b + 1, either way). fwd[s], bwd[s]: one micro-batch's
// forward and backward on stage s. Returns the time until the last stage is done. Without
// transfers and with equal stages it is (m + p − 1)·(fwd + bwd), pipeline_time's; with
// unequal stages it is shorter where the schedule lets a fast stage run ahead.
// `cores` > 0: the ranks share that many cores (live CPU ranks on one machine: the
// calibration's), each pass taking `ranks_per_stage` of them, granted in the order the passes
// become ready; a pass waits for its cores, a transfer needs none. 0: a device per rank.
// `wait_share[s]` (nullptr: 0): the part of stage s's passes its ranks spend waiting in
// collectives (a rank thread blocked in one sleeps): a pass holds its cores for the rest
// only, so another stage's pass may compute while it waits (a fluid view of the interleaving).
double pipeline_replay(const double* fwd, const double* bwd, const double* hop, int stages,
                       int micro_batches, Schedule schedule, int ranks_per_stage = 1,
                       int cores = 0, const double* wait_share = nullptr);
// An iteration's schedule with its point-to-point transfers (docs/design.md §4, "Pipeline
// transfers"). mb[s]: one micro-batch on stage s, fwd_share[s] of it forward; hop[b] for
// b < p − 1 the transfer over boundary b, hop[p − 1] from the last stage to the first.
// GPipe, 1F1B: pipeline_replay. Interleaved with v chunks: stage s transfers
// e_s = v·(in + out) − [s = 0]·in − [s = p − 1]·out per micro-batch (Megatron-LM's count,
// 2·m·(p·v − 1) an iteration), under its compute with `overlap_p2p` (max) or after it (sum);
// the warm-up and flush expose one micro-batch's p·v − 1 boundaries each way:
//   T = m·max_s(mb_s ⊕ e_s) + (Σ mb − max mb)/v + 2·(v·Σ_{b<p−1} hop_b + (v − 1)·hop_{p−1}).
double pipeline_time_with_transfers(const double* mb, const double* fwd_share, const double* hop,
                                    int stages, int micro_batches, Schedule schedule,
                                    int virtual_stages, bool overlap_p2p,
                                    int ranks_per_stage = 1, int cores = 0,
                                    const double* wait_share = nullptr);
// Idle fraction of an iteration of equal stages: (p−1)/(m·v + p − 1).
double bubble_fraction(int stages, int micro_batches, int virtual_stages);
double micro_batches_in_flight(Schedule schedule, int stages, int micro_batches,
                               int virtual_stages, int stage);
// Exposed time of work `total` that overlaps `window` in `buckets` pieces (data-parallel
// gradient reduction under the last backward, or parameter all-gather under the first
// forward): at least the last bucket stays exposed.
double overlapped_exposed(double total, double window, int buckets);

}  // namespace shardgym
