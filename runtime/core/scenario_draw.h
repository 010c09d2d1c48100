// Scenario draws: a task's events drawn from distributions, one instance per seed
// (docs/design.md §4, "Tasks with distributions"; docs/configs.md, `scenario.draw`).
//
// A scenario file may list, besides scripted `events`, `draw` items: "1 to 3 stragglers per
// episode, each on a rank drawn uniformly, starting at a uniform step, lasting a log-normal
// number of steps, slowed by 1.29 or 2". Scenario::drawn() (scenario.h) turns them into
// events for one instance:
//
//   Scenario task = spec.scenario;       // draws as parsed
//   task.instance = 7;
//   Scenario one = task.drawn();         // scripted events + instance 7's draws, sorted
//
// Reproducible: an instance's events depend on its seed and the draw items only, and are the
// same on every platform (the engine's raw 64-bit output; log-normal values are rounded to
// 1e-3 before use, so a last-ulp difference in a platform's log or cos cannot change them).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace shardgym {

struct ScenarioEvent;

// One random number of a draw item. `constant`: value; `uniform`: in [low, high] (integer
// uses draw whole numbers, both ends included); `lognormal`: exp(N(log median, sigma)),
// clamped to [low, high]; `choice`: one of `values`, by `weights` (empty = equal).
struct Distribution {
  enum class Kind { kConstant, kUniform, kLogNormal, kChoice };
  Kind kind = Kind::kConstant;
  double value = 0;
  double low = 0, high = 0;
  double median = 0, sigma = 0;
  std::vector<double> values, weights;

  static Distribution constant(double v);
  static Distribution uniform(double low, double high);
  // Real draws (factors); integer draws (steps, counts) round to the nearest whole number.
  double draw(std::mt19937_64& rng) const;
  int draw_int(std::mt19937_64& rng) const;
  double max_value() const;  // the largest value it can return (bounds the events it makes)
};

// One `draw:` item. Windows (stragglers, congestion, lost ranks): `count` windows, each on
// one of `targets` (ranks, links or groups of ranks: a node), from `start` for `duration`
// steps, a window never overlapping (or touching) another on the same target (a target already taken at
// that time is skipped for the next free one; none free: the window is dropped). Ramps
// (sequence length, global batch): from `from` to `to` in `levels` equal steps over `ramp`
// steps from step 0, each level rounded down to a multiple of `multiple`.
struct EventDraw {
  enum class Kind { kStraggler, kLinkBandwidth, kRankLoss, kSeqLength, kBatch };
  Kind kind = Kind::kStraggler;
  // Windows.
  Distribution count, start, duration, factor;
  std::vector<std::string> links;            // kLinkBandwidth: candidate link classes
  std::vector<std::vector<int>> rank_groups;  // kStraggler / kRankLoss: candidate ranks
                                              // (one per group; a node's ranks for nodes)
  // Ramps.
  int from = 0, to = 0, levels = 1, multiple = 1;
  Distribution ramp;

  bool is_ramp() const { return kind == Kind::kSeqLength || kind == Kind::kBatch; }
  // The most events one instance of it can make (count's maximum × 2 × the largest group).
  long long max_events() const;
};

// The events of `draws` for `instance`, appended to `out` (unsorted). Item i draws from its
// own stream seeded by (instance, i), so adding an item leaves the others' draws as they were.
void draw_events(const std::vector<EventDraw>& draws, uint64_t instance,
                 std::vector<ScenarioEvent>& out);

}  // namespace shardgym
