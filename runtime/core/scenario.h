// Scenario: what happens to the cluster while an episode runs (DESIGN.md §4, "Dynamics").
//
// Events fire when the env step counter reaches `step` and stay in force until another
// event of the same kind and target replaces them. Factors multiply nominal values.
#pragma once

#include <string>
#include <vector>

namespace shardgym {

enum class EventKind {
  kLinkBandwidth,  // target: link class name; factor multiplies its bandwidth
  kStraggler,      // rank: which rank; factor multiplies its compute time (2.0 = half speed)
  kSeqLength,      // value: new sequence length
  kBatch,          // value: new global batch
};

struct ScenarioEvent {
  int step = 0;
  EventKind kind = EventKind::kLinkBandwidth;
  std::string target;  // link class name (kLinkBandwidth)
  int rank = -1;       // kStraggler
  double factor = 1.0;
  int value = 0;       // kSeqLength / kBatch
};

struct Scenario {
  std::string name = "static";
  std::vector<ScenarioEvent> events;  // sorted by step
  double noise = 0.0;                 // σ of multiplicative log-normal noise on times
  // Number of distinct phases: 1 + number of distinct event steps.
  int phase_at(int step) const;
  int num_phases() const;
};

}  // namespace shardgym
