// The registered simulated env ("shardgym/TPSim-v0") and a speed sanity check of SimRun.
// The speed figures are printed, not asserted: timing depends on the machine.
#include <gtest/gtest.h>

#include <time.h>

#include <cstdio>
#include <random>

#include "env/registry.h"
#include "env/vector_env.h"
#include "runtime/sim/sim_run.h"
#include "tests/core/expect_measurement.h"
#include "tests/sim/sim_fixtures.h"

namespace shardgym {
namespace {

ExperimentSpec big_spec() {
  // 32 layers on 64 simulated GPUs (8 nodes of 8), the size `shardgym bench sim` uses. The
  // memory is made ample so that every shape-valid plan is allowed.
  ExperimentSpec s =
      testing::experiment(testing::gpt(32, 4096, 32, 2048, 1),
                          testing::cluster(8, 8, testing::h100_sxm(), testing::nvswitch()));
  s.cluster.devices[0].memory_bytes = 1e15;
  return s;
}

// Random plans over the catalog (shape-valid entries only).
std::vector<Plan> random_plans(const TrainingRun& run, int count, int changed_blocks) {
  const int blocks = run.model().num_blocks();
  const auto& cat = run.catalog();
  std::mt19937_64 rng(0);
  std::vector<Plan> plans;
  Plan p = run.plan();
  for (int i = 0; i < count; ++i) {
    for (int c = 0; c < changed_blocks; ++c) {
      const int b = changed_blocks == blocks ? c : int(rng() % blocks);
      const auto& shape = cat.shape_mask(ModelSpec::block_kind(b));
      int k;
      do k = int(rng() % cat.size());
      while (!shape[k]);
      p.blocks[b] = cat.at(k);
    }
    plans.push_back(p);
  }
  return plans;
}

double thread_cpu_s() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Steps per second of this thread's CPU time (the machine may be shared).
template <typename F>
double rate(int n, F&& step) {
  const double t0 = thread_cpu_s();
  for (int i = 0; i < n; ++i) step(i);
  return n / (thread_cpu_s() - t0);
}

// 4 layers on 2 nodes of 8 H100s, 5 % noise, rewards normalised, `steps` per episode.
ExperimentSpec noisy_spec(int steps) {
  ExperimentSpec spec =
      testing::experiment(testing::gpt(4, 4096, 32, 2048, 1),
                          testing::cluster(2, 8, testing::h100_sxm(), testing::nvswitch()));
  spec.scenario.noise = 0.05;
  spec.reward.normalize = true;
  spec.steps_per_episode = steps;
  return spec;
}

TEST(SimEnv, IsRegisteredAndSteps) {
  ASSERT_TRUE(env_registered("shardgym/TPSim-v0"));
  ExperimentSpec spec = testing::experiment(testing::gpt(2, 1024, 16, 512, 2),
                                            testing::cluster(1, 4, testing::h100_sxm(),
                                                             testing::nvswitch()));
  auto env = make_bare_env("shardgym/TPSim-v0", spec);
  EXPECT_EQ(env->spec().backend, "sim");
  EXPECT_EQ(env->spec().num_blocks, 4);
  env->reset(3);
  const auto mask = env->action_mask();
  Action a(4, 0);
  for (int b = 0; b < 4; ++b) {
    while (!mask[b * env->spec().catalog_size + a[b]]) ++a[b];
  }
  const StepResult r = env->step(a);
  EXPECT_FALSE(r.truncated) << r.info.error;
  EXPECT_TRUE(r.info.measurement.ok);
  EXPECT_GT(r.info.measurement.step_latency_s, 0);
}

// Sibling envs (make_sibling_envs: one spec, side by side, as vector envs build them) share
// their costs and step exactly as envs built alone, with make_env's stack.
TEST(SimEnv, SiblingsStepAsEnvsBuiltAlone) {
  const ExperimentSpec spec = noisy_spec(6);
  const EnvMaker sibling = make_sibling_envs("shardgym/TPSim-v0", spec);
  auto a = sibling(), b = sibling(), alone = make_env("shardgym/TPSim-v0", spec);
  a->reset(5), b->reset(5), alone->reset(5);
  const Space& space = alone->spec().action_space;
  std::mt19937_64 rng(2);
  for (int t = 0; t < 6; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<uint8_t> mask = alone->action_mask();
    ASSERT_EQ(a->action_mask(), mask);
    const Action action = space.sample(rng, &mask);
    const StepResult r = alone->step(action), ra = a->step(action), rb = b->step(action);
    for (const StepResult* s : {&ra, &rb}) {
      EXPECT_EQ(s->obs, r.obs);
      EXPECT_EQ(s->reward, r.reward);  // NormalizeReward: the stack is make_env's
      EXPECT_EQ(s->truncated, r.truncated);  // TimeLimit
      EXPECT_EQ(s->info.measurement.repartition_s, r.info.measurement.repartition_s);
    }
  }
}

// Sibling envs stepped by a VectorEnv on two threads fill what they share at the same time
// (runtime/sim/cost_share.h: block and memory figures, mask tables, transfer tables) and
// step exactly as envs built alone, stepped one after another, across a phase change and an
// autoreset. Under ThreadSanitizer (.ci/run) this is the simulator's race check.
TEST(SimEnv, SiblingsOnThreadsStepAsEnvsBuiltAlone) {
  ExperimentSpec spec = noisy_spec(6);
  ScenarioEvent seq;  // a phase change: the shared transfer tables are keyed by phase
  seq.step = 3, seq.kind = EventKind::kSeqLength, seq.value = 1024;
  spec.scenario.events.push_back(seq);
  constexpr int kN = 4, kSteps = 14;
  const EnvMaker sibling = make_sibling_envs("shardgym/TPSim-v0", spec);
  VectorEnv vec(kN, [&](int) { return sibling(); }, /*threads=*/2);
  std::vector<std::unique_ptr<Env>> alone;
  for (int i = 0; i < kN; ++i) alone.push_back(make_env("shardgym/TPSim-v0", spec));
  const std::vector<Observation> obs = vec.reset(7);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(obs[i], alone[i]->reset(7 + i).obs);
  const Space& space = vec.spec().action_space;
  std::mt19937_64 rng(3);
  int ended = 0;
  for (int t = 0; t < kSteps; ++t) {
    const std::vector<std::vector<uint8_t>> masks = vec.action_masks();
    std::vector<Action> actions;
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(masks[i], alone[i]->action_mask()) << "env " << i << " step " << t;
      actions.push_back(space.sample(rng, &masks[i]));
    }
    const VectorStep v = vec.step(actions);
    for (int i = 0; i < kN; ++i) {
      const StepResult s = alone[i]->step(actions[i]);
      EXPECT_EQ(v.rewards[i], s.reward) << "env " << i << " step " << t;
      EXPECT_EQ(v.infos[i].measurement.repartition_s, s.info.measurement.repartition_s);
      if (s.truncated) {
        ++ended;
        EXPECT_EQ(v.final_obs[i], s.obs);
        EXPECT_EQ(v.obs[i], alone[i]->reset().obs);
      } else {
        EXPECT_EQ(v.obs[i], s.obs);
      }
    }
  }
  EXPECT_GE(ended, kN);
}

TEST(SimEnv, StepSpeedSanity) {
  const ExperimentSpec spec = big_spec();
  SimRun run(spec);
  const int n = 20000;
  const auto all = random_plans(run, 64, run.model().num_blocks());
  const auto one = random_plans(run, 64, 1);
  run.reset(0, run.plan());
  for (const auto& p : all) ASSERT_TRUE(run.step(p).ok);  // warm the caches
  const Plan fixed = run.plan();
  const double same = rate(n, [&](int) { run.step(fixed); });
  const double single = rate(n, [&](int i) { run.step(one[i % one.size()]); });
  const double every = rate(n, [&](int i) { run.step(all[i % all.size()]); });
  std::printf("SimRun 32 layers / 64 GPUs: %.0f steps/s (same plan), %.0f (one block changed), "
              "%.0f (every block re-drawn)\n", same, single, every);

  auto env = make_bare_env("shardgym/TPSim-v0", spec);
  env->reset(0);
  auto to_action = [&](const Plan& p) {
    Action a(p.size());
    for (int b = 0; b < p.size(); ++b) a[b] = env->run().catalog().index_of(p.blocks[b]);
    return a;
  };
  std::vector<Action> acts_one, acts_all;
  for (const auto& p : one) acts_one.push_back(to_action(p));
  for (const auto& p : all) acts_all.push_back(to_action(p));
  for (const auto& a : acts_all) env->step(a);
  const Action fixed_action = acts_all.back();
  const double env_same = rate(n, [&](int) { env->step(fixed_action); });
  const double env_single = rate(n, [&](int i) { env->step(acts_one[i % acts_one.size()]); });
  const double env_every = rate(n, [&](int i) { env->step(acts_all[i % acts_all.size()]); });
  std::printf("PartitionEnv over it:       %.0f steps/s (same plan), %.0f (one block changed), "
              "%.0f (every block re-drawn)\n", env_same, env_single, env_every);
  RecordProperty("sim_steps_per_s_same_plan", std::to_string(same));
  RecordProperty("env_steps_per_s_same_plan", std::to_string(env_same));
  RecordProperty("env_steps_per_s_random_plans", std::to_string(env_every));
}

// VectorEnv steps each env into one StepResult it keeps (Env::step_into) and reads masks with
// action_mask_into: through make_env's stack (TimeLimit, NormalizeReward, PartitionEnv over
// SimRun) these must give exactly what step() and action_mask() give, episode after episode,
// whatever the reused result held before. A result that asks for a lean Info (VectorEnv's)
// gets the same figures, observation, reward, flags, error and plan indices.
TEST(SimEnv, StepIntoAndMaskIntoMatchStepAndMask) {
  const ExperimentSpec spec = noisy_spec(5);
  auto a = make_env("shardgym/TPSim-v0", spec), b = make_env("shardgym/TPSim-v0", spec);
  auto c = make_env("shardgym/TPSim-v0", spec);
  EXPECT_EQ(a->reset(3).obs, b->reset(3).obs);
  c->reset(3);
  StepResult lean;
  lean.lean_info = true;
  StepResult reused;
  reused.obs.assign(7, 9.0f);  // left over from elsewhere: none of it may survive
  reused.truncated = true;
  reused.info.scalars["left_over"] = 1;
  reused.info.error = "left over";
  const Space& space = a->spec().action_space;
  std::vector<uint8_t> mask_b(a->action_mask().size());
  std::mt19937_64 rng(4);
  int ended = 0;
  for (int t = 0; t < 14; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<uint8_t> mask = a->action_mask();
    b->action_mask_into(mask_b.data(), mask_b.size());
    ASSERT_EQ(mask_b, mask);
    // Every third step keeps the plan (mask rows come from the cache), the others draw
    // allowed entries for every block.
    Action action = space.sample(rng, &mask);
    if (t % 3 == 2) {
      const Plan& now = a->run().plan();
      for (int i = 0; i < now.size(); ++i) action[i] = a->run().catalog().index_of(now.blocks[i]);
    }
    const StepResult r = a->step(action);
    auto same_step = [&r](const StepResult& x) {  // what a lean step fills too
      EXPECT_EQ(x.obs, r.obs);
      EXPECT_EQ(x.reward, r.reward);
      EXPECT_EQ(x.terminated, r.terminated);
      EXPECT_EQ(x.truncated, r.truncated);
      EXPECT_EQ(x.info.plan_indices, r.info.plan_indices);
      EXPECT_EQ(x.info.error, r.info.error);
      EXPECT_EQ(x.info.measurement.step_latency_s, r.info.measurement.step_latency_s);
      EXPECT_EQ(x.info.measurement.block_comm_s, r.info.measurement.block_comm_s);
    };
    b->step_into(action, reused);
    same_step(reused);
    EXPECT_EQ(reused.info.plan, r.info.plan);
    EXPECT_EQ(reused.info.scalars, r.info.scalars);
    testing::expect_same_measurement(reused.info.measurement, r.info.measurement);
    c->step_into(action, lean);
    same_step(lean);
    EXPECT_TRUE(lean.info.scalars.empty()) << "a lean step leaves the scalars alone";
    if (r.terminated || r.truncated) {
      ++ended;
      const Observation next = a->reset().obs;
      EXPECT_EQ(b->reset().obs, next);
      EXPECT_EQ(c->reset().obs, next);
    }
  }
  EXPECT_GE(ended, 2);
}

}  // namespace
}  // namespace shardgym
