// The plan search (agents/plan_polish.h) on a scripted policy: two block kinds, three catalog
// entries, a policy that always decodes entry 0, and an episode of two steps whose return
// the test sets. What the search keeps is then known exactly.
#include "agents/plan_polish.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

namespace shardgym {
namespace {

constexpr int K = 3;

// An episode of two steps, the first under condition {1}, the second under {2}. The policy
// decodes entry 0 for both kinds; its tables map it as SubstitutionTables::substitute does
// (table 0, then the table of the step's condition key). `reward(seed, step, attention, mlp)`
// scores a step.
class ScriptedPolicy {
 public:
  using Reward = std::function<double(uint64_t, int, int, int)>;
  explicit ScriptedPolicy(Reward reward) : reward_(std::move(reward)) {
    tables.catalog = K, tables.blocks = 2, tables.cond_index = {0};  // one condition value
    tables.clear();
  }
  // The search's episodes of this policy.
  PolishEpisode play() {
    return [this](uint64_t seed, PolishLook* look) { return episode(seed, look); };
  }
  // Entry played by `kind` at `step` under the tables in force.
  int plays(int kind, int step) const {
    const int e = tables.sub[kind * K + 0];
    if (tables.keys() == 0) return e;
    return tables.sub[(static_cast<size_t>(1 + step) * 2 + kind) * K + e];
  }
  SubstitutionTables tables;
  int episodes = 0;

 private:
  double episode(uint64_t seed, PolishLook* look) {
    ++episodes;
    const int keys = tables.keys();
    if (look) {
      look->held.assign(2 * (1 + keys), std::vector<uint8_t>(K, 0));
      look->allowed.assign(look->held.size(), std::vector<uint8_t>(K, 1));
      look->conditions = {{1.0f}, {2.0f}};
    }
    double total = 0;
    for (int step = 0; step < 2; ++step) {
      for (int kind = 0; look && kind < 2; ++kind) {
        look->held[kind][0] = 1;  // what the policy decoded, before the tables
        if (keys > 0) look->held[2 * (1 + step) + kind][tables.sub[kind * K]] = 1;
      }
      total += reward_(seed, step, plays(0, step), plays(1, step));
    }
    return total;
  }
  Reward reward_;
};

constexpr uint64_t kSeedA = 11, kSeedB = 22;

PolishResult search(ScriptedPolicy& p, double gain) {
  return polish_plans(p.tables, p.play(), kSeedA, kSeedB, gain);
}

TEST(PlanPolish, KeepsASubstitutionThatGainsOnBothSeeds) {
  // Attention entry 2 gains 1 a step, MLP entry 1 gains 0.5: both are found, one per round.
  ScriptedPolicy p([](uint64_t, int, int a, int m) {
    return (a == 2 ? 1.0 : 0.0) + (m == 1 ? 0.5 : 0.0);
  });
  const PolishResult r = search(p, 1e-3);
  EXPECT_EQ(r.kept, 2);
  EXPECT_EQ(r.kept_keyed, 0);
  // The third round found nothing and keyed a table to each of the episode's two conditions:
  // identity tables, kept, which change nothing.
  EXPECT_EQ(p.tables.keys(), 2);
  EXPECT_DOUBLE_EQ(r.first, 0.0);
  EXPECT_DOUBLE_EQ(r.last, 3.0);
  EXPECT_EQ(p.plays(0, 0), 2);
  EXPECT_EQ(p.plays(1, 1), 1);
  EXPECT_EQ(r.episodes, p.episodes);
}

TEST(PlanPolish, AGainOnTheFirstSeedAloneIsNotKept) {
  // Entry 1 gains on seed A and loses on seed B: the tables stay the identity.
  ScriptedPolicy p([](uint64_t seed, int, int a, int) {
    return a == 1 ? (seed == kSeedA ? 1.0 : -1.0) : 0.0;
  });
  const PolishResult r = search(p, 1e-3);
  EXPECT_EQ(r.kept, 0);
  for (int kind = 0; kind < 2; ++kind)
    for (int e = 0; e < K; ++e) EXPECT_EQ(p.tables.sub[kind * K + e], e);
  EXPECT_DOUBLE_EQ(r.last, r.first);
}

TEST(PlanPolish, AGainBelowTheThresholdIsNotKept) {
  ScriptedPolicy p([](uint64_t, int, int a, int) { return 100.0 + (a == 1 ? 0.05 : 0.0); });
  EXPECT_EQ(search(p, 1e-3).kept, 0);  // 0.1 on 200: under 0.1 %
  EXPECT_EQ(search(p, 1e-4).kept, 1);
}

TEST(PlanPolish, KeysATablePerConditionWhereNoPlanForAllStepsGains) {
  // Attention entry 1 gains 1 in the first condition and loses 1 in the second; entry 2 the
  // reverse: no entry for every step gains, one per condition gains 2.
  ScriptedPolicy p([](uint64_t, int step, int a, int) {
    if (a == 0) return 0.0;
    return (a == 1) == (step == 0) ? 1.0 : -1.0;
  });
  const PolishResult r = search(p, 1e-3);
  EXPECT_EQ(p.tables.keys(), 2);
  EXPECT_EQ(r.keys, 2);
  // Round 1 keys the first condition's table to entry 1; round 2 then gains with table 0
  // (entry 2 everywhere, which the first condition's table maps to 1).
  EXPECT_EQ(r.kept, 2);
  EXPECT_EQ(r.kept_keyed, 1);
  EXPECT_EQ(p.plays(0, 0), 1);
  EXPECT_EQ(p.plays(0, 1), 2);
  EXPECT_DOUBLE_EQ(r.last, 2.0);
  EXPECT_NE(polish_note(7, r).find("2 substitutions kept (1 of them for one of 2 conditions)"),
            std::string::npos)
      << polish_note(7, r);
}

TEST(PlanPolish, AFailingEpisodeNeverBeatsTheTablesInForce) {
  ScriptedPolicy p([](uint64_t, int, int a, int) {
    return a == 1 ? -std::numeric_limits<double>::infinity() : 0.0;
  });
  EXPECT_EQ(search(p, 0).kept, 0);
}

// Table 0 applies at every step, then the table of the observation's nearest key; a
// substitute the block's mask does not allow is not taken.
TEST(SubstitutionTables, AppliesTableZeroThenTheNearestKeysTable) {
  SubstitutionTables t;
  t.catalog = K, t.blocks = 4, t.cond_index = {1};  // the condition: the observation's [1]
  t.clear();
  t.set_keys({{1.0f}, {4.0f}});
  ASSERT_EQ(t.keys(), 2);
  ASSERT_EQ(t.sub.size(), 3u * 2 * K);
  t.sub[0 * K + 0] = 1;                 // table 0, attention: 0 -> 1
  t.sub[(2 * 2 + 0) * K + 1] = 2;       // key 1's table, attention: 1 -> 2
  t.sub[(2 * 2 + 1) * K + 0] = 2;       // key 1's table, MLP: 0 -> 2
  const std::vector<uint8_t> all(4 * K, 1);
  for (float condition : {1.05f, 3.7f}) {
    const float obs[2] = {0.0f, condition};
    int32_t act[4] = {0, 0, 0, 1};
    t.substitute(obs, act, all);
    const bool second = condition > 2;
    EXPECT_EQ(t.nearest_key(obs), second ? 1 : 0);
    EXPECT_EQ(act[0], second ? 2 : 1);  // attention 0 -> 1 (-> 2 under key 1)
    EXPECT_EQ(act[1], second ? 2 : 0);  // MLP 0 -> 2 under key 1 only
    EXPECT_EQ(act[3], 1);               // MLP 1 kept
  }
  std::vector<uint8_t> no_two(all);
  for (int b = 0; b < 4; ++b) no_two[b * K + 2] = 0;
  const float obs[2] = {0.0f, 4.0f};
  int32_t act[4] = {0, 0, 0, 0};
  t.substitute(obs, act, no_two);
  EXPECT_EQ(act[0], 1);  // table 0's substitute taken, key 1's (2) not allowed
  EXPECT_EQ(act[1], 0);
  EXPECT_TRUE(SubstitutionTables::same_conditions({1.0f, 2.0f}, {1.05f, 1.9f}));
  EXPECT_FALSE(SubstitutionTables::same_conditions({1.0f, 2.0f}, {1.0f, 2.5f}));
}

}  // namespace
}  // namespace shardgym
