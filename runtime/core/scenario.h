// Scenario: what happens to the cluster while an episode runs (docs/design.md §4, "Dynamics").
//
// Events fire when the env step counter reaches `step` and stay in force until another
// event of the same kind and target replaces them. Factors multiply nominal values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/scenario_draw.h"

namespace shardgym {

struct ClusterSpec;

enum class EventKind {
  kLinkBandwidth,  // target: link class name; factor multiplies its bandwidth
  kStraggler,      // rank: which rank; factor multiplies its compute time (2.0 = half speed)
  kSeqLength,      // value: new sequence length
  kBatch,          // value: new global batch
  kRankLoss,       // rank: a GPU that fails (a node's failure is one event per rank)
  kRankJoin,       // rank: a lost GPU back in service
};

// What a job pays when its plan needs a lost rank: it restarts from its last checkpoint on a
// spare GPU (docs/design.md, "Uneven work and an elastic world"). The restart costs
//   restart_s + state bytes per rank / read_bytes_per_s + checkpoint_interval / 2 steps
// of the plan (the work since the last checkpoint, lost on average half an interval: the
// rollback T0 = Gf/2 of Huawei MindCluster's resumable-training guide), after which the spare
// stands in for the lost rank until it rejoins. A scenario file with rank_loss events states
// all three next to their sources (experiments/scenarios/node-loss-return.yaml).
struct RestartModel {
  double restart_s = 0;           // relaunch, rendezvous and communicator initialisation
  double read_bytes_per_s = 0;    // checkpoint storage read bandwidth per rank
  int checkpoint_interval = 0;    // env steps (iterations) between checkpoints
};

struct ScenarioEvent {
  int step = 0;
  EventKind kind = EventKind::kLinkBandwidth;
  std::string target;  // link class name (kLinkBandwidth)
  int rank = -1;       // kStraggler, kRankLoss, kRankJoin
  double factor = 1.0;
  int value = 0;       // kSeqLength / kBatch
  bool operator==(const ScenarioEvent& o) const {
    return step == o.step && kind == o.kind && target == o.target && rank == o.rank &&
           factor == o.factor && value == o.value;
  }
  bool operator!=(const ScenarioEvent& o) const { return !(*this == o); }
};

// The cluster as the scenario's events have left it at one step: events in step order, a
// later one replacing an earlier one of the same kind and target, a rank_join undoing its
// rank's rank_loss. An event naming a link class or rank the cluster does not have changes
// nothing (runs refuse such scenarios before they start).
struct ScenarioState {
  std::vector<double> link_factor;  // per ClusterSpec::links entry, 1 = nominal bandwidth
  std::vector<double> slowdown;     // per rank, 1 = nominal speed
  std::vector<uint8_t> lost;        // per rank, 1 = lost (rank_loss, no rank_join since)
  int seq = 0, global_batch = 0;    // where an event set them; 0 = the model's own
};

struct Scenario {
  std::string name = "static";
  std::vector<ScenarioEvent> events;  // scripted events, sorted by step
  // Events drawn per instance (scenario_draw.h); `instance` is the seed of the draws. Only
  // drawn() holds them as events: runs build from drawn(), never from `events` alone.
  std::vector<EventDraw> draws;
  uint64_t instance = 0;
  double noise = 0.0;                 // σ of multiplicative log-normal noise on times
  RestartModel restart;               // needed when some event is a kRankLoss
  // `events` plus the draws of `instance`, sorted by step (stable: scripted events first at
  // a step); `draws` empty. A scenario without draws comes back as it is.
  Scenario drawn() const;
  bool has_rank_loss() const;  // of `events` (call on drawn() for an instance's)
  // Number of distinct phases: 1 + number of distinct event steps.
  int phase_at(int step) const;
  int num_phases() const;
  // What the events up to and including `step` have set on `cluster` (ScenarioState); every
  // backend reads the scenario through it.
  ScenarioState state_at(int step, const ClusterSpec& cluster) const;
};

}  // namespace shardgym
