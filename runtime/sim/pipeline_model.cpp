#include "runtime/sim/pipeline_model.h"

#include <algorithm>
#include <numeric>

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
