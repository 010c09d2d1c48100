// Pipeline schedules: how long an iteration of m micro-batches takes over p stages, and how
// many micro-batches' activations each stage holds at its peak (docs/design.md §4).
//
// With C_s the time of one micro-batch's forward + backward on stage s (its p2p transfers
// excluded), the schedules of Narayanan et al. 2021 ("Efficient Large-Scale Language Model
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
// Idle fraction of an iteration of equal stages: (p−1)/(m·v + p − 1).
double bubble_fraction(int stages, int micro_batches, int virtual_stages);
double micro_batches_in_flight(Schedule schedule, int stages, int micro_batches,
                               int virtual_stages, int stage);
// Exposed time of work `total` that overlaps `window` in `buckets` pieces (data-parallel
// gradient reduction under the last backward, or parameter all-gather under the first
// forward): at least the last bucket stays exposed.
double overlapped_exposed(double total, double window, int buckets);

}  // namespace shardgym
