// Scenario features of the config loader: repeated events (`every`, `until`) and `seq_mix`
// (sequence lengths drawn from a histogram), expanded at load into ordinary events.
#include <gtest/gtest.h>

#include <map>

#include "experiments/config.h"
#include "tests/experiments/scenario_configs.h"

namespace shardgym {
namespace {

ExperimentSpec load(const std::string& scenario) {
  return testing::load_scenario(scenario);
}

TEST(ScenarioConfig, RepeatedEventsExpandBelowUntil) {
  const ExperimentSpec spec = load(
      "  events:\n"
      "    - {step: 10, kind: link_bandwidth, link: l, factor: 0.5, every: 20, until: 60}\n"
      "    - {step: 20, kind: link_bandwidth, link: l, factor: 1.0, every: 20, until: 60}\n");
  std::vector<std::pair<int, double>> got;
  for (const auto& e : spec.scenario.events) got.push_back({e.step, e.factor});
  const std::vector<std::pair<int, double>> want = {{10, 0.5}, {20, 1.0}, {30, 0.5},
                                                    {40, 1.0}, {50, 0.5}};
  EXPECT_EQ(got, want);
}

TEST(ScenarioConfig, RepetitionErrorsNameTheKey) {
  const auto expect_error = [](const std::string& scenario, const std::string& key) {
    testing::expect_scenario_error(scenario, key);
  };
  expect_error("  events: [{step: 1, kind: straggler, rank: 0, factor: 2, every: 3}]\n",
               "scenario.events[0].every");
  expect_error("  events: [{step: 1, kind: straggler, rank: 0, factor: 2, until: 9}]\n",
               "scenario.events[0].until");
  expect_error("  events: [{step: 1, kind: straggler, rank: 0, factor: 2, every: 0, until: 9}]\n",
               "scenario.events[0].every");
  expect_error("  events: [{step: 0, kind: straggler, rank: 0, factor: 2, every: 1, "
               "until: 2000000000}]\n",
               "scenario.events[0].every");
  expect_error("  seq_mix: {lengths: [128, 256], weights: [1], until: 10}\n",
               "scenario.seq_mix.weights");
  expect_error("  seq_mix: {lengths: [128, 256], weights: [0, 0], until: 10}\n",
               "scenario.seq_mix.weights");
  expect_error("  seq_mix: {lengths: [128, 256], weights: [1, 1]}\n", "scenario.seq_mix.until");
}

TEST(ScenarioConfig, SeqMixDrawsFromTheHistogramReproducibly) {
  const std::string mix =
      "  seq_mix: {lengths: [64, 128, 256], weights: [1, 0, 3], every: 2, until: 4000, seed: 7}\n";
  const ExperimentSpec a = load(mix), b = load(mix);
  ASSERT_EQ(a.scenario.events.size(), 2000u);
  std::map<int, int> count;
  for (size_t i = 0; i < a.scenario.events.size(); ++i) {
    const ScenarioEvent& e = a.scenario.events[i];
    EXPECT_EQ(e.kind, EventKind::kSeqLength);
    EXPECT_EQ(e.step, static_cast<int>(2 * i));
    EXPECT_EQ(e.value, b.scenario.events[i].value);  // same seed, same lengths
    ++count[e.value];
  }
  EXPECT_EQ(count[128], 0);  // weight 0 is never drawn
  // 3:1 odds: 1500 expected of 2000 (binomial σ ≈ 19).
  EXPECT_NEAR(count[256], 1500, 100);
  const ExperimentSpec c = load(
      "  seq_mix: {lengths: [64, 128, 256], weights: [1, 0, 3], every: 2, until: 4000, seed: 8}\n");
  int same = 0;
  for (size_t i = 0; i < c.scenario.events.size(); ++i)
    same += c.scenario.events[i].value == a.scenario.events[i].value;
  EXPECT_LT(same, 1900);  // another seed, another sequence
}

}  // namespace
}  // namespace shardgym
