// The plan search over a greedy policy's plans (PPO's `polish`, ppo.h), as a unit of its own.
//
// The search knows the policy only through PolishTarget: its substitution tables (table t,
// entry (t · 2 + kind) · K + e, is the entry a block of that kind plays where the policy
// decodes e; table 0 applies at every step, table 1 + k under condition key k) and one greedy
// episode played with them. A candidate replaces, for one kind of block (or both), one entry
// the greedy policy holds by another, wherever it holds it. Each round scores every single
// substitution (one kind, or both to the same entry) on one seed; when none gains, the pairs
// of each kind's best 8; the best candidate is kept when its return beats the tables in force
// by more than `gain` (relative) on that seed and again on a second. When nothing for all
// steps gains and the episode showed 2 to kMaxKeys distinct conditions, the search keys a
// table to each: under a key a kind's entry is set outright (singles, both kinds, then
// pairs). Up to 4 rounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardgym {

// What one greedy episode showed the search: per table t (0: every step; 1 + k: the steps
// under key k) and kind, held[2t + kind][e]: some block of the kind held e; allowed[2t +
// kind][f]: every block of the kind was allowed f at once at some step. And the distinct
// conditions of its steps.
struct PolishLook {
  std::vector<std::vector<uint8_t>> held, allowed;
  std::vector<std::vector<float>> conditions;
};

class PolishTarget {
 public:
  virtual ~PolishTarget() = default;
  virtual int catalog() const = 0;              // K
  virtual std::vector<int32_t>& tables() = 0;  // (1 + keys()) · 2 · K entries
  virtual int keys() const = 0;
  // One identity table per condition (the policy unchanged), table 0 kept.
  virtual void set_keys(const std::vector<std::vector<float>>& conditions) = 0;
  // One greedy episode's return under the tables in force (−inf when a step fails); fills
  // `look` where given.
  virtual double greedy_return(uint64_t seed, PolishLook* look) = 0;
};

struct PolishResult {
  int episodes = 0, kept = 0, kept_keyed = 0, keys = 0;
  double first = 0, last = 0;  // greedy return on the first seed before and after
  double wall_s = 0;
};

// Tables per condition only where an episode shows between 2 and this many distinct
// conditions (scenario phases, sequence lengths); more would be one per step.
inline constexpr int kPolishMaxKeys = 8;

// The search on seeds a (rounds) and b (confirmation); the tables it keeps stay in `target`.
PolishResult polish_plans(PolishTarget& target, uint64_t seed_a, uint64_t seed_b, double gain);

// The search's line in TrainProgress::notes.
std::string polish_note(int updates, const PolishResult& r);

}  // namespace shardgym
