// Uneven work on live ranks: plans with data shares (`@dp(w=...)`) train through LiveRun and
// the live env's share action, and a scenario's straggler events stretch their rank's compute
// (RankTrainer::set_compute_stretch) and show in the context, as in the simulator's env.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "env/registry.h"
#include "env/share_action.h"
#include "runtime/live/driver/live_run.h"
#include "runtime/live/driver/rank_protocol.h"
#include "tests/live/live_test_spec.h"

namespace shardgym::live {
namespace {

ScenarioEvent straggler(int step, int rank, double factor) {
  ScenarioEvent e;
  e.step = step;
  e.kind = EventKind::kStraggler;
  e.rank = rank;
  e.factor = factor;
  return e;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

TEST(LiveShares, TheStepCommandCarriesEachRanksStretch) {
  RankCommand cmd;
  cmd.op = RankOp::kStep;
  cmd.slowdown = {1, 2.5};
  EXPECT_EQ(RankCommand::parse(cmd.serialize()).slowdown, (std::vector<double>{1, 2.5}));
  EXPECT_TRUE(RankCommand::parse(RankCommand().serialize()).slowdown.empty());
}

// A plan with uneven shares trains on live ranks with the even plan's losses (same seed, same
// batches: the update is the same), so does one that excludes a group (rank 1 leaves, then
// rejoins and receives its state), and shares no rank can train are refused before any rank
// sees them.
TEST(LiveShares, UnevenSharesTrainWithTheEvenPlansLosses) {
  ExperimentSpec spec = tiny_live_spec(2, "threads");  // global batch 8
  spec.live.precision = "float64";
  LiveRun even(spec), uneven(spec);
  const int blocks = even.model().num_blocks();
  const Plan p_even = Plan::parse("uniform:dp", blocks);
  const Plan p_uneven = Plan::parse("uniform:dp@dp(w=3/1)", blocks);
  ASSERT_EQ(uneven.why_invalid(p_uneven), "");
  for (const auto& [a, b] : expect_same_losses(
           even, uneven, {{p_even, p_uneven}, {p_even, p_uneven}, {p_even, p_uneven}}, 4))
    ASSERT_TRUE(a.ok && b.ok);
  for (const char* shares : {"w=1/0", "w=1/0", "w=1/1"}) {
    const Measurement a = even.step(p_even);
    const Measurement b = uneven.step(Plan::parse(std::string("uniform:dp@dp(") + shares + ")",
                                                  blocks));
    ASSERT_TRUE(a.ok) << a.error;
    ASSERT_TRUE(b.ok) << shares << ": " << b.error;
    EXPECT_NEAR(b.loss, a.loss, 1e-9 * a.loss) << shares;
  }
  const Measurement bad = uneven.step(Plan::parse("uniform:dp@dp(w=0/0)", blocks));
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("every group has weight 0"), std::string::npos) << bad.error;
  EXPECT_TRUE(uneven.running()) << "a refused plan must not disturb the ranks";
}

// Straggler events reach the ranks from their step on: the context shows the factor, and the
// stretched steps are slower. At factor 100 the straggler idles 99 times its compute in every
// iteration (RankTrainer's own test shows the idling); the test asks only for 1.5 times the
// step time, so that a busy machine cannot fail it by noise alone.
TEST(LiveShares, StragglerEventsStretchTheirRankFromTheirStepOn) {
  ExperimentSpec spec = tiny_live_spec(2, "threads");
  spec.live.iterations = 3;
  spec.scenario.name = "one-straggler";
  spec.scenario.events = {straggler(2, 1, 100.0)};
  LiveRun run(spec);
  const Plan plan = Plan::parse("uniform:dp", run.model().num_blocks());
  run.reset(1, plan);
  std::vector<double> before, after;
  for (int i = 0; i < 4; ++i) {
    const RunContext c = run.context();
    if (i < 2) {
      EXPECT_TRUE(c.rank_slowdown.empty()) << "step " << i;
    } else {
      EXPECT_EQ(c.rank_slowdown, (std::vector<double>{1, 100})) << "step " << i;
      EXPECT_EQ(c.max_compute_slowdown, 100);
    }
    const Measurement m = run.step(plan);
    ASSERT_TRUE(m.ok) << m.error;
    (i < 2 ? before : after).push_back(m.step_latency_s);
  }
  std::printf("step time before the straggler %.4f s, after %.4f s (medians of 2 steps)\n",
              median(before), median(after));
  EXPECT_GT(median(after), 1.5 * median(before))
      << "before " << median(before) << " s, after " << median(after) << " s";
}

// The live env takes straggler events (and only those) and offers the share action: after the
// event, "balanced" gives the slow rank's group the smaller share.
TEST(LiveShares, TheLiveEnvBalancesSharesAgainstAStraggler) {
  ExperimentSpec spec = tiny_live_spec(2, "threads");  // global batch 8
  spec.scenario.events = {straggler(1, 1, 3.0)};
  spec.data_share_groups = 2;
  auto env = make_bare_env("shardgym/TPLive-v0", spec);
  env->reset(2);
  const int blocks = env->run().model().num_blocks();
  Action keep(blocks + 1, 0);
  for (int b = 0; b < blocks; ++b) keep[b] = env->run().catalog().index_of(Strategy::dp());
  ASSERT_TRUE(env->step(keep).info.measurement.ok);  // step 0: no straggler yet
  Action balanced = keep;
  balanced[blocks] = share_choice_offset(1) + 1;  // share choice 1: balanced
  const StepResult r = env->step(balanced);       // step 1: rank 1 at a third of its speed
  ASSERT_TRUE(r.info.measurement.ok) << r.info.measurement.error;
  EXPECT_EQ(env->run().plan().pipeline.shares, (std::vector<int>{6, 2}))
      << env->run().plan().to_string();
  // The live env now offers leaving the straggler's group out (share choice 2 + 1), and it
  // trains there on rank 0 alone; "even" brings rank 1 back.
  const std::vector<uint8_t> mask = env->action_mask();
  const int plan_offset = static_cast<int>(mask.size()) - plan_component_choices(1, 2);
  EXPECT_TRUE(mask[plan_offset + share_choice_offset(1) + 3]) << "group 1 left out not offered";
  Action out = keep;
  out[blocks] = share_choice_offset(1) + 3;
  const StepResult left = env->step(out);
  ASSERT_TRUE(left.info.measurement.ok) << left.info.measurement.error;
  EXPECT_EQ(env->run().plan().pipeline.shares, (std::vector<int>{8, 0}));
  EXPECT_TRUE(std::isfinite(left.info.measurement.loss));
  Action even = keep;
  even[blocks] = share_choice_offset(1);
  ASSERT_TRUE(env->step(even).info.measurement.ok);
  EXPECT_TRUE(env->run().plan().pipeline.shares.empty())  // even: written without shares
      << env->run().plan().to_string();

  ExperimentSpec links = tiny_live_spec(2, "threads");
  ScenarioEvent slow_link;
  slow_link.kind = EventKind::kLinkBandwidth;
  slow_link.target = "loopback";
  slow_link.factor = 0.5;
  links.scenario.events = {slow_link};
  EXPECT_NO_THROW(validate_env_spec(spec));
  try {
    validate_env_spec(links);
    ADD_FAILURE() << "a link event was accepted on live ranks";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("straggler events only"), std::string::npos) << e.what();
  }
  ExperimentSpec faster = tiny_live_spec(2, "threads");
  faster.scenario.events = {straggler(0, 0, 0.5)};
  EXPECT_THROW(validate_env_spec(faster), EnvOptionError);
}

// replan on live ranks plans on its simulator twin (agents/replan.cpp) and follows the
// straggler: balanced shares while rank 1 is slow, even ones before and after. Its decisions
// come from the twin's costs, not from live timings, so the test does not depend on the
// machine's noise.
TEST(LiveShares, ReplanFollowsAStragglerOnLiveRanksThroughItsSimulatorTwin) {
  ExperimentSpec spec = tiny_live_spec(2, "threads");  // global batch 8
  spec.model.hidden = 128;  // compute enough for the twin to see the straggler
  spec.scenario.events = {straggler(3, 1, 3.0), straggler(6, 1, 1.0)};
  spec.data_share_groups = 2;
  spec.steps_per_episode = 9;
  std::unique_ptr<Env> env = make_env(spec.env_id, spec);
  std::unique_ptr<Agent> agent = make_agent("replan", env->spec(), 0);
  std::vector<std::vector<int>> shares;
  EpisodeHooks hooks;
  hooks.on_step = [&](const StepResult& r, const EpisodeSummary&) {
    ASSERT_TRUE(r.info.measurement.ok) << r.info.measurement.error;
    shares.push_back(r.info.plan.pipeline.shares);
  };
  run_episode(*env, *agent, 0, /*learn=*/false, hooks);
  ASSERT_EQ(shares.size(), 9u);
  auto even = [](const std::vector<int>& w) {
    return w.empty() || std::all_of(w.begin(), w.end(), [&](int x) { return x == w[0]; });
  };
  const std::vector<int> balanced = {6, 2};  // 8 sequences at speeds 1 and 1/3
  EXPECT_TRUE(even(shares[0])) << "step 0: " << shares[0].size();
  EXPECT_EQ(shares[4], balanced) << "while rank 1 is slow";
  EXPECT_TRUE(even(shares[8])) << "after the straggler recovered";
}

}  // namespace
}  // namespace shardgym::live
