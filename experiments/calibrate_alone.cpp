#include "experiments/calibrate_alone.h"

#include <vector>

#include "experiments/calibration_fit.h"

namespace shardgym::detail {

// Collectives and stage boundaries alone, at three sizes around the model's messages: what the
// link does without a training step around it. The collectives' fit is recorded, not used:
// the link above is fitted from the waits the training step itself sees, which is what the
// simulator prices for them. The boundaries' fit prices a pipeline's stage-to-stage transfers:
// the schedule's replay counts a transfer's waits for its sender and receiver itself, so the
// transfer is the exchange alone (one message each way, posted together).
void time_collectives_alone(TrainingRun& run, bool native_rs, CalibrationFile& c) {
  std::vector<double> steps, bytes, seconds, p2p_steps, p2p_bytes, p2p_seconds;
  for (double size : {4096.0, 65536.0, 1048576.0}) {
    for (const TrainingRun::CollectiveTiming& t : run.time_collectives(size, 20)) {
      CalibrationFile::Collective row;
      row.op = t.op;
      for (size_t i = 0; i < t.group.size(); ++i)
        row.group += (i ? "," : "") + std::to_string(t.group[i]);
      row.bytes = t.bytes, row.seconds = t.seconds;
      c.collectives.push_back(row);
      if (t.op == "p2p") {
        p2p_steps.push_back(1), p2p_bytes.push_back(t.bytes), p2p_seconds.push_back(t.seconds);
        continue;
      }
      // Ring steps and bytes each rank sends (NCCL's and Gloo's ring algorithms).
      const double n = double(t.group.size()), b = t.bytes;
      const bool reduce = t.op == "all_reduce" || (t.op == "reduce_scatter" && !native_rs);
      steps.push_back(reduce ? 2 * (n - 1) : n - 1);
      bytes.push_back(reduce                 ? 2 * (n - 1) / n * b
                      : t.op == "all_gather" ? (n - 1) * b
                                             : (n - 1) / n * b);
      seconds.push_back(t.seconds);
    }
  }
  if (!seconds.empty()) {
    const LinkFit f = fit_link(steps, bytes, seconds);
    c.collective_latency_s = f.alpha;
    c.collective_bandwidth = f.inv_bandwidth > 0 ? 1.0 / f.inv_bandwidth : 1e18;
    c.collective_fit_error = f.fit_error;
  }
  if (!p2p_seconds.empty()) {
    const LinkFit f = fit_link(p2p_steps, p2p_bytes, p2p_seconds);
    c.p2p_latency_s = f.alpha;
    c.p2p_bandwidth = f.inv_bandwidth > 0 ? 1.0 / f.inv_bandwidth : 1e18;
    c.p2p_fit_error = f.fit_error;
  }
}

}  // namespace shardgym::detail
