#include "experiments/calibrate_repartition.h"

#include <iomanip>
#include <sstream>

#include "analysis/stats.h"
#include "experiments/calibration_fit.h"
#include "runtime/sim/sim_run.h"

namespace shardgym::detail {

namespace {

// The repartition fit's median error on the table's changes and on the boundary moves, beside
// a fit without the boundary moves (not used), one progress line.
void report_repartition_fit(const RepartitionFit& f, const std::vector<double>& blocks,
                            const std::vector<double>& messages, const std::vector<double>& bytes,
                            const std::vector<double>& seconds, const std::vector<char>& boundary,
                            const LiveMeasureOptions& o) {
  std::vector<double> tb, tm, tby, ts;  // the table's changes alone
  for (size_t i = 0; i < seconds.size(); ++i)
    if (!boundary[i])
      tb.push_back(blocks[i]), tm.push_back(messages[i]), tby.push_back(bytes[i]),
          ts.push_back(seconds[i]);
  if (ts.size() == seconds.size()) return;  // no boundary move
  const RepartitionFit without = fit_repartition(tb, tm, tby, ts);
  // Median of predicted / measured − 1 over the boundary moves (moves) or the table's changes.
  auto signed_median = [&](const RepartitionFit& k, bool moves) {
    std::vector<double> e;
    for (size_t i = 0; k.fitted && i < seconds.size(); ++i)
      if (bool(boundary[i]) == moves && seconds[i] > 0)
        e.push_back(k.predict(blocks[i], messages[i], bytes[i]) / seconds[i] - 1);
    return e.empty() ? 0.0 : 100 * median(e);
  };
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "repartition fit with "
       << seconds.size() - ts.size()
       << " boundary moves: median error (signed) on the table's changes " << std::showpos
       << signed_median(f, false) << " %, on the boundary moves " << signed_median(f, true)
       << " %; a fit without them (not used): " << signed_median(without, false) << " %, "
       << signed_median(without, true) << std::noshowpos << " % (" << std::setprecision(3)
       << without.fixed_s * 1e3 << " ms + " << without.per_block_s * 1e3 << " ms per block + "
       << without.per_message_s * 1e3 << " ms per message + bytes / "
       << (without.inv_bandwidth > 0 ? 1e-9 / without.inv_bandwidth : 1e9) << " GB/s)";
  o.progress(line.str());
}

}  // namespace

// Repartition: a fixed time, a time per block whose state moves (each is rebuilt), a time
// per message (the most messages one rank sends and receives, summed over those blocks) and
// bytes over a bandwidth, from the changes between the random plans and the pipeline pass's
// boundary moves (fit_repartition), each change's blocks and messages counted by the simulator
// that prices it (PlanPricer::last_repartition). The uniform plans' changes are left out: each
// brings strategies not seen before, whose process groups the live run creates then, once (a
// cost of the first use, not of a repartition). Why messages: on 4 rank threads, Megatron-LM's
// plan to uniform:dp (every rank gathers from 3 peers) took 9.2 ms for 7.1 MB and to
// uniform:tp1d(t=2) (from 1 peer) 3.7 ms for 3.6 MB; bytes and blocks alone priced the first at
// 5.2 ms. Why only blocks whose state moves: a change of sp, chunks or recompute alone keeps
// the tensors (0.27 ms for all 8 blocks, against 2.4 ms predicted when every changed block
// counted). Why boundary moves: without them the fit saw none, and priced those of pipelined
// plans too slow (docs/calibration.md, "The repartition's terms").
void fit_repartition_terms(const ExperimentSpec& sspec, const std::vector<MeasuredChange>& changes,
                           uint64_t seed, const LiveMeasureOptions& o, CalibrationFile& c) {
  SimRun counter(sspec);
  std::vector<double> moved_blocks, messages, bytes, seconds;
  std::vector<char> boundary;
  for (const MeasuredChange& ch : changes) {
    counter.reset(seed, ch.from);
    counter.step(ch.to);
    const PlanPricer::RepartitionSums& r = counter.last_repartition();
    if (!r.changed) continue;
    moved_blocks.push_back(r.moved_blocks), messages.push_back(r.messages);
    bytes.push_back(ch.stats->repartition_bytes), seconds.push_back(ch.stats->repartition_s);
    boundary.push_back(ch.boundary_move);
  }
  const RepartitionFit f = fit_repartition(moved_blocks, messages, bytes, seconds);
  if (!f.fitted) return;
  if (o.progress && f.left_out > 0) {
    o.progress("repartition fit: " + std::to_string(f.left_out) + " of " +
               std::to_string(seconds.size()) + " changes left out (more than " +
               std::to_string(static_cast<int>(100 * f.left_out_limit)) + " % off the first fit)");
  }
  if (o.progress) report_repartition_fit(f, moved_blocks, messages, bytes, seconds, boundary, o);
  RuntimeCalibration& rc = c.runtime;
  rc.repartition_fixed_s = f.fixed_s;
  rc.repartition_per_block_s = f.per_block_s;
  rc.repartition_per_message_s = f.per_message_s;
  // No measurable per-byte cost: bytes take no time (bandwidth far above what moved).
  rc.repartition_bandwidth = f.inv_bandwidth > 0 ? 1.0 / f.inv_bandwidth : 1e18;
  c.repartition_fit_error = f.fit_error;
}

}  // namespace shardgym::detail
