// Measurement: what one env step observed of the training run, simulated or live.
//
// The simulator fills it from the cost model (sources "model"); the live run from clocks,
// allocator counters and RAPL/NVML. Each figure says where it came from.
#pragma once

#include <string>
#include <vector>

namespace shardgym {

struct Measurement {
  double step_latency_s = 0;        // one training iteration, after the repartition
  double repartition_s = 0;         // moving params + optimizer state to the new plan
  double repartition_bytes = 0;     // bytes received, summed over ranks
  // The most memory any rank held during the repartition on top of what it held before it:
  // new state of the block in flight, the message in transit, minus what earlier blocks freed
  // (runtime/live/tp/repartition.cpp; predicted by runtime/sim/layout.h). 0 without one.
  double repartition_peak_bytes = 0;
  double energy_j = 0;              // whole world, iteration + repartition
  double tokens = 0;                // tokens trained in the iteration
  double loss = 0;                  // live runs: training loss; sim: 0
  // Per block, of the critical rank: the rank whose step is step_latency_s (live runs; every
  // figure is that one rank's, so with the rest of its step they add up to the latency).
  std::vector<double> block_fwd_s;  // B: per-block forward compute
  std::vector<double> block_bwd_s;  // B: per-block backward compute
  std::vector<double> block_comm_s; // B: per-block exposed communication
  // The optimizer step (clipping and the update of every parameter the rank holds, the
  // embedding and LM head included), the critical rank's; live runs measure it, the simulator
  // leaves 0 (its optimizer time is inside the blocks' and the per-step overhead's).
  double optimizer_s = 0;
  std::vector<double> peak_memory_bytes;  // P: peak per rank
  // Live runs with live.iterations > 1: iterations measured for this step (figures above are
  // their medians) and (p90 − p10) / median of their step latencies; 1 and 0 otherwise.
  int iterations = 1;
  double step_latency_spread = 0;
  bool oom = false;
  bool ok = true;
  std::string error;                // set when !ok (rank, operation, reason)
  std::string latency_source = "model";  // "model" | "wallclock" | "cuda_events"
  std::string memory_source = "model";   // "model" | "allocator" | "cuda_caching_allocator"
  std::string energy_source = "model";   // "model" | "rapl" | "nvml"

  // Tokens per second including the repartition time charged to this step.
  double throughput() const {
    double t = step_latency_s + repartition_s;
    return t > 0 ? tokens / t : 0;
  }
};

}  // namespace shardgym
