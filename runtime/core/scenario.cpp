#include "runtime/core/scenario.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "runtime/core/cluster_spec.h"

namespace shardgym {

Scenario Scenario::drawn() const {
  Scenario s = *this;
  if (draws.empty()) return s;
  draw_events(draws, instance, s.events);
  s.draws.clear();
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const ScenarioEvent& a, const ScenarioEvent& b) { return a.step < b.step; });
  return s;
}

int Scenario::phase_at(int step) const {
  std::set<int> steps;
  for (const auto& e : events)
    if (e.step <= step) steps.insert(e.step);
  return static_cast<int>(steps.size());
}

bool Scenario::has_rank_loss() const {
  for (const auto& e : events)
    if (e.kind == EventKind::kRankLoss) return true;
  return false;
}

ScenarioState Scenario::state_at(int step, const ClusterSpec& cluster) const {
  const int world = cluster.world_size();
  ScenarioState s;
  s.link_factor.assign(cluster.links.size(), 1.0);
  s.slowdown.assign(static_cast<size_t>(std::max(0, world)), 1.0);
  s.lost.assign(s.slowdown.size(), 0);
  // In step order, the order of the list within a step (events are kept sorted; a list that
  // is not is read as if it were).
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events[a].step < events[b].step; });
  for (size_t i : order) {
    const ScenarioEvent& e = events[i];
    if (e.step > step) break;
    const bool rank_ok = e.rank >= 0 && e.rank < world;
    switch (e.kind) {
      case EventKind::kLinkBandwidth: {
        const int l = cluster.link_index(e.target);
        if (l >= 0) s.link_factor[static_cast<size_t>(l)] = e.factor;
        break;
      }
      case EventKind::kStraggler:
        if (rank_ok) s.slowdown[static_cast<size_t>(e.rank)] = e.factor;
        break;
      case EventKind::kSeqLength: s.seq = e.value; break;
      case EventKind::kBatch: s.global_batch = e.value; break;
      case EventKind::kRankLoss:
      case EventKind::kRankJoin:
        if (rank_ok) s.lost[static_cast<size_t>(e.rank)] = e.kind == EventKind::kRankLoss;
        break;
    }
  }
  return s;
}

int Scenario::num_phases() const {
  std::set<int> steps;
  for (const auto& e : events) steps.insert(e.step);
  return 1 + static_cast<int>(steps.size());
}

}  // namespace shardgym
