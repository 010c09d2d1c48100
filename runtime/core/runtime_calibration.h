// The calibration a cluster carries into the simulator: what `shardgym calibrate` fitted on
// live ranks (experiments/calibrate.cpp measures, experiments/calibration_fit.h fits,
// experiments/calibration_file.h reads and writes the file). Plain data; ClusterSpec holds one.
#pragma once

#include <string>
#include <vector>

namespace shardgym {

// What `shardgym calibrate` measured on the live runtime (docs/calibration.md), as the
// config's `cluster.calibration` file gives it. The simulator takes a block's times from the
// table when the block's strategy and the model it runs (`model_signature`, see
// calibration_signature) match; everything else keeps the physical model, whose device and
// link parameters the calibration has already replaced with fitted ones.
struct MeasuredBlock {
  int kind = 0;           // BlockKind: 0 attention, 1 MLP
  std::string strategy;   // Strategy::to_string()
  double fwd_s = 0, bwd_s = 0, comm_s = 0;  // one micro-batch, critical rank, median
  double spread = 0;      // (p90 − p10) / median of fwd + bwd + comm over the iterations
};

struct RuntimeCalibration {
  std::string path;             // "" = none
  std::string model_signature;  // the micro-batch model and world the table was measured on
  std::vector<MeasuredBlock> blocks;
  double step_overhead_s = 0;   // per micro-batch: embedding, LM head, loss, global norm
  double redistribution_s = 0;  // per micro-batch and change of activation layout, on top
                                // of the link model's transfer (fwd + bwd) ...
  double redistribution_scale = 1;  // ... scaled by this: the share of the modelled transfer
                                    // time a step shows (1 in files without it)
  double optimizer_s_per_param = 0;  // per iteration and parameter held by the rank
  double noise_sigma = 0;       // log-normal σ of the step latency between iterations
  // Peak memory per rank = state_scale · (params, gradients, optimizer state) +
  // activation_scale · (activations, logits) + base_bytes, of the physical model's terms.
  double memory_state_scale = 1, memory_activation_scale = 1, memory_base_bytes = 0;
  // A repartition that changes any block takes fixed_s + per_block_s × blocks whose state
  // moves + per_message_s × Σ over those blocks of the most messages one rank sends and
  // receives + bytes (summed over ranks) / bandwidth; bandwidth 0 = the physical model's
  // transfers.
  double repartition_fixed_s = 0, repartition_per_block_s = 0, repartition_bandwidth = 0;
  double repartition_per_message_s = 0;  // 0 in files without it
  // Cores of the machine the live ranks ran on (the calibration's `machine: cores`), which all
  // ranks share: pipeline stages then wait for a core as well as for their neighbours
  // (pipeline_model.h, pipeline_replay). 0: a device per rank.
  int host_cores = 0;
  // The ranks' threads issue and run their kernels themselves (live CPU ranks): a micro-batch
  // takes its compute plus its issue time, not the larger of the two (a GPU's queue).
  bool serial_host = false;
  bool empty() const { return path.empty(); }
  const MeasuredBlock* find(int kind, const std::string& strategy,
                            const std::string& signature) const;
};

}  // namespace shardgym
