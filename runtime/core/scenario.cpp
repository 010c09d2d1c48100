#include "runtime/core/scenario.h"

#include <set>

namespace shardgym {

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
