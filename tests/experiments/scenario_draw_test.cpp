// Scenario draws (runtime/core/scenario_draw.h): a task's events drawn per instance from the
// distributions of its file. An instance is reproducible from its seed, other seeds give other
// events, windows never overlap on one target, and a bad draw is refused at its key.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "experiments/config.h"
#include "runtime/core/scenario.h"
#include "runtime/sim/sim_run.h"
#include "tests/experiments/scenario_configs.h"

namespace shardgym {
namespace {

ExperimentSpec load(const std::string& scenario) {
  return testing::load_scenario(scenario, /*two_nodes=*/true);
}

const char* kStragglers =
    "  draw:\n"
    "    - {kind: straggler, count: [2, 4], start: [0, 80], factor: {choice: [1.29, 2.0]},\n"
    "       duration: {lognormal: {median: 15, sigma: 0.7}, min: 2, max: 60}}\n"
    "    - {kind: link_bandwidth, link: ib, count: 3, start: [0, 90], duration: [5, 10],\n"
    "       factor: [0.3, 0.6]}\n";

std::vector<ScenarioEvent> events_of(const ExperimentSpec& spec, uint64_t instance) {
  return with_instance(spec, instance).scenario.drawn().events;
}

TEST(ScenarioDraw, AnInstanceIsReproducibleFromItsSeed) {
  const ExperimentSpec spec = load(kStragglers);
  ASSERT_EQ(spec.scenario.draws.size(), 2u);
  EXPECT_TRUE(spec.scenario.events.empty());  // only drawn() holds the draws' events
  const auto a = events_of(spec, 7);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, events_of(spec, 7));
  EXPECT_EQ(a, events_of(load(kStragglers), 7));  // a fresh load: the same instance
  // Other seeds give other instances (20 seeds, at most one repeat allowed by chance).
  std::set<std::vector<std::pair<int, int>>> distinct;
  for (uint64_t s = 0; s < 20; ++s) {
    std::vector<std::pair<int, int>> key;
    for (const auto& e : events_of(spec, s)) key.push_back({e.step, e.rank});
    distinct.insert(key);
  }
  EXPECT_GE(distinct.size(), 19u);
}

TEST(ScenarioDraw, WindowsStayWithinTheirDistributionsAndNeverOverlapOnATarget) {
  const ExperimentSpec spec = load(kStragglers);
  for (uint64_t s = 0; s < 200; ++s) {
    const auto ev = events_of(spec, s);
    std::map<int, double> slow;  // rank → factor in force
    int links = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      const ScenarioEvent& e = ev[i];
      if (i > 0) {
        ASSERT_LE(ev[i - 1].step, e.step);  // sorted
      }
      if (e.kind == EventKind::kStraggler) {
        ASSERT_GE(e.rank, 0);
        ASSERT_LT(e.rank, 8);
        if (e.factor != 1.0) {
          ASSERT_TRUE(e.factor == 1.29 || e.factor == 2.0) << e.factor;
          ASSERT_LE(e.step, 80);
          ASSERT_TRUE(slow[e.rank] == 1.0 || slow[e.rank] == 0.0) << "overlap on rank " << e.rank;
        }
        slow[e.rank] = e.factor;
      } else {
        ASSERT_EQ(e.kind, EventKind::kLinkBandwidth);
        ASSERT_EQ(e.target, "ib");
        if (e.factor != 1.0) {
          ASSERT_GE(e.factor, 0.3);
          ASSERT_LE(e.factor, 0.6);
        }
        ++links;
      }
    }
    // Every window ends: 2-4 straggler windows (2 events each), up to 3 link windows (one
    // link: later windows that overlap an earlier one are dropped).
    int straggler_events = static_cast<int>(ev.size()) - links;
    EXPECT_GE(straggler_events, 4);
    EXPECT_LE(straggler_events, 8);
    EXPECT_GE(links, 2);
    EXPECT_LE(links, 6);
    EXPECT_EQ(links % 2, 0);
  }
}

TEST(ScenarioDraw, NodeLossTakesAWholeNodeAndItReturns) {
  const ExperimentSpec spec = load(
      "  draw: [{kind: rank_loss, target: node, count: 1, start: [10, 20], duration: 30}]\n"
      "  restart: {restart_s: 300, read_gbps: 0.4, checkpoint_interval: 100}\n");
  for (uint64_t s = 0; s < 20; ++s) {
    const auto ev = events_of(spec, s);
    ASSERT_EQ(ev.size(), 8u);  // 4 losses then 4 joins
    const int first = ev[0].rank / 4 * 4;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(ev[i].kind, EventKind::kRankLoss);
      EXPECT_EQ(ev[i].rank, first + i);
      EXPECT_EQ(ev[i + 4].kind, EventKind::kRankJoin);
      EXPECT_EQ(ev[i + 4].step, ev[i].step + 30);
    }
  }
  EXPECT_TRUE(with_instance(spec, 3).scenario.drawn().has_rank_loss());
}

TEST(ScenarioDraw, RampsClimbInLevelsRoundedToTheirMultiple) {
  const ExperimentSpec spec = load(
      "  draw: [{kind: seq_length, from: 64, to: 256, levels: 3, ramp: [30, 60], multiple: 32}]\n");
  for (uint64_t s = 0; s < 20; ++s) {
    const auto ev = events_of(spec, s);
    ASSERT_EQ(ev.size(), 4u);
    EXPECT_EQ(ev[0].step, 0);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(ev[k].value, 64 * (k + 1)) << "level " << k;
    EXPECT_GE(ev[3].step, 30);
    EXPECT_LE(ev[3].step, 60);
  }
}

TEST(ScenarioDraw, TheInstanceTravelsInTheRecordedText) {
  const ExperimentSpec spec = load(kStragglers);
  const ExperimentSpec eleven = with_instance(spec, 11);
  EXPECT_EQ(eleven.source_text.rfind("instance: 11\n", 0), 0u);
  const ExperimentSpec again = parse_experiment(eleven.source_text, "s.yaml", ".");
  EXPECT_EQ(again.scenario.instance, 11u);
  EXPECT_EQ(events_of(again, 11), events_of(spec, 11));
  // Setting it twice rewrites the line rather than adding a second key.
  const ExperimentSpec twelve = with_instance(eleven, 12);
  EXPECT_EQ(parse_experiment(twelve.source_text, "s.yaml", ".").scenario.instance, 12u);
}

TEST(ScenarioDraw, ASimRunOfAnInstanceRunsItsEvents) {
  ExperimentSpec spec = load(kStragglers);
  spec.scenario.noise = 0;
  const Scenario drawn = with_instance(spec, 5).scenario.drawn();
  SimRun run(with_instance(spec, 5));
  EXPECT_EQ(run.scenario().events, drawn.events);
  SimRun other(with_instance(spec, 6));
  EXPECT_NE(other.scenario().events, drawn.events);
}

TEST(ScenarioDraw, BadDrawsAreRefusedAtTheirKey) {
  const auto expect_error = [](const std::string& scenario, const std::string& key) {
    testing::expect_scenario_error(scenario, key, /*two_nodes=*/true);
  };
  expect_error("  draw: [{kind: straggler, count: 1, start: 0, duration: 5, factor: 2, "
               "among: [9]}]\n",
               "scenario.draw[0].among[0]");
  expect_error("  draw: [{kind: link_bandwidth, link: nvlink, count: 1, start: 0, duration: 5, "
               "factor: 0.5}]\n",
               "scenario.draw[0].link");
  expect_error("  draw: [{kind: straggler, count: [3, 1], start: 0, duration: 5, factor: 2}]\n",
               "scenario.draw[0].count");
  expect_error("  draw: [{kind: straggler, count: 1, start: 0, duration: 5, "
               "factor: {lognormal: {median: 2, sigma: 1}}}]\n",
               "scenario.draw[0].factor.min");  // a log-normal needs its bounds
  expect_error("  draw: [{kind: straggler, count: 1001, start: 0, duration: 5, factor: 2}]\n",
               "scenario.draw[0].count");
  expect_error("  draw: [{kind: rank_loss, count: 1, start: 0, duration: 5}]\n", "scenario");
  expect_error("  draw: [{kind: seq_length, from: 64, to: 256, levels: 0, ramp: 5}]\n",
               "scenario.draw[0].levels");
  // 1000 windows × 2 events × 4 ranks per node, 13 items: past the events limit.
  std::string many = "  draw:\n";
  for (int i = 0; i < 13; ++i)
    many += "    - {kind: straggler, target: node, count: 1000, start: 0, duration: 1, factor: 2}\n";
  expect_error(many, "scenario.draw[12]");
}

}  // namespace
}  // namespace shardgym
