#include "runtime/core/scenario.h"

#include <algorithm>
#include <set>

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

int Scenario::num_phases() const {
  std::set<int> steps;
  for (const auto& e : events) steps.insert(e.step);
  return 1 + static_cast<int>(steps.size());
}

}  // namespace shardgym
