// The plan search over a greedy policy's plans, as a unit of its own (the agent that runs it
// around a learner, `ppo(polish=N)`: agents/polished.h).
//
// The search knows the policy only through its SubstitutionTables (below) and a function that
// plays one greedy episode with them. A candidate replaces, for one kind of block (or both), one
// entry the greedy policy holds by another, wherever it holds it. Each round scores every single
// substitution (one kind, or both to the same entry) on one seed; when none gains, the pairs of
// each kind's best 8; the best candidate is kept when its return beats the tables in force by more
// than `gain` (relative) on that seed and again on a second. When nothing for all steps gains and
// the episode showed 2 to kPolishMaxKeys distinct conditions, the search keys a table to each:
// under a key a kind's entry is set outright (singles, both kinds, then pairs). Up to 4 rounds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "env/env.h"

namespace shardgym {

class Agent;

// A policy's substitution tables and the condition keys that choose among them: table t,
// sub[(t · 2 + kind) · K + e], is the entry a block of that kind takes where the policy
// decodes e (identity: none). Table 0 applies at every step, then table 1 + k at steps whose
// conditions are nearest key k's.
struct SubstitutionTables {
  int catalog = 0, blocks = 0;
  std::vector<int32_t> sub;
  std::vector<float> key_values;    // keys() × conditions' size
  std::vector<int64_t> cond_index;  // where the conditions are in the observation

  // Identity tables, no keys, conditions read where `spec`'s observation names them: the
  // global part's sequence factor and compute slowdown, every link class, every share
  // (PartitionEnv::observation_parts). Throws std::invalid_argument without a global part.
  explicit SubstitutionTables(const EnvSpec& spec);
  SubstitutionTables() = default;
  int keys() const {
    return cond_index.empty() ? 0 : static_cast<int>(key_values.size() / cond_index.size());
  }
  // The run's conditions in an observation: not the phase's index, so a key is what the run
  // looks like, and a scenario whose events come at other steps or in another order finds it.
  std::vector<float> conditions(const float* obs) const;
  // Conditions within measurement noise of each other: every entry within 10 % (|log ratio|
  // < 0.1). The link bandwidths are measured, with the scenario's noise (2 % per step in the
  // configs: 0.1 is 5 σ of it), and the smallest event of the scenarios changes a condition
  // by 25 % or more (a 1.29× straggler, a link at 0.75).
  static bool same_conditions(const std::vector<float>& a, const std::vector<float>& b);
  // The key nearest to obs's conditions (Σ |log ratio| over the conditions); −1: no keys.
  int nearest_key(const float* obs) const;
  // Keys for these conditions, each with an identity table (table 0 stays as it is).
  void set_keys(const std::vector<std::vector<float>>& conditions);
  // No keys, and table 0 the identity.
  void clear();
  // Applies table 0, then the table of obs's nearest key, to the block rows of one decoded
  // action (a substitute the block's mask, `usable`, does not allow is not taken).
  void substitute(const float* obs, int32_t* act, const std::vector<uint8_t>& usable) const;
};

// What one greedy episode showed the search: per table t (0: every step; 1 + k: the steps
// under key k) and kind, held[2t + kind][e]: some block of the kind held e; allowed[2t +
// kind][f]: every block of the kind was allowed f at once at some step. And the distinct
// conditions of its steps.
struct PolishLook {
  std::vector<std::vector<uint8_t>> held, allowed;
  std::vector<std::vector<float>> conditions;
};

// One greedy episode's return under the tables as they stand (−inf when a step fails);
// fills `look` where given (polish_episode is the one for an Agent on an Env).
using PolishEpisode = std::function<double(uint64_t seed, PolishLook* look)>;

struct PolishResult {
  int episodes = 0, kept = 0, kept_keyed = 0, keys = 0;
  double first = 0, last = 0;  // greedy return on the first seed before and after
  double wall_s = 0;
};

// Tables per condition only where an episode shows between 2 and this many distinct
// conditions (scenario phases, sequence lengths); more would be one per step.
inline constexpr int kPolishMaxKeys = 8;

// One greedy episode of `agent` on `env` (whose act applies `tables`): its return, −inf where
// a step fails, and with `look` what it showed the search.
double polish_episode(Env& env, Agent& agent, const SubstitutionTables& tables, uint64_t seed,
                      PolishLook* look);

// The search on seeds a (rounds) and b (confirmation), `play` scoring `tables` as the search
// edits them; the tables it keeps stay in `tables`.
PolishResult polish_plans(SubstitutionTables& tables, const PolishEpisode& play, uint64_t seed_a,
                          uint64_t seed_b, double gain);

// The search's line in TrainProgress::notes.
std::string polish_note(int updates, const PolishResult& r);

}  // namespace shardgym
