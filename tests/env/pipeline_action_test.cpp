// The pipeline component of the action (env/pipeline_action.h) on the simulator: boundary
// moves keep the plan valid or are masked, and with one stage nothing changes.
#include "env/pipeline_action.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "env/incremental_action.h"
#include "env/partition_env.h"
#include "runtime/sim/sim_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

std::unique_ptr<PartitionEnv> sim_env(const ExperimentSpec& spec) {
  return std::make_unique<PartitionEnv>("shardgym/TPSim-v0", std::make_unique<SimRun>(spec),
                                        spec);
}

// The split the observation's pipeline part encodes (PartitionEnv layout: the first layer of
// each stage after the first, / layers): what the observation tells a policy, checked against
// the plan in force.
std::vector<int> split_from_observation(const std::vector<float>& obs, int stages, int layers) {
  const size_t part = static_cast<size_t>(pipeline_choices(stages));
  std::vector<int> split(stages);
  int prev = 0;
  for (int i = 0; i + 1 < stages; ++i) {
    const int first = static_cast<int>(std::lround(obs.at(obs.size() - part + i) * layers));
    split[i] = first - prev;
    prev = first;
  }
  split[stages - 1] = layers - prev;
  return split;
}

// Peak memory of the fullest rank for `plan` on a fresh run of `spec`.
double peak_of(const ExperimentSpec& spec, const Plan& plan) {
  SimRun run(spec);
  const auto m = run.estimate(plan);
  EXPECT_TRUE(m && m->ok) << plan.to_string();
  return *std::max_element(m->peak_memory_bytes.begin(), m->peak_memory_bytes.end());
}

TEST(PipelineAction, ChoicesMoveOneBoundaryByOneLayer) {
  Pipeline p = Pipeline::parse("pp(p=3,m=6)");
  EXPECT_EQ(pipeline_choices(1), 0);
  EXPECT_EQ(pipeline_choices(3), 5);
  EXPECT_EQ(apply_pipeline_choice(p, 0, 9), p);
  EXPECT_EQ(apply_pipeline_choice(p, 1, 9).split, (std::vector<int>{2, 4, 3}));
  EXPECT_EQ(apply_pipeline_choice(p, 2, 9).split, (std::vector<int>{4, 2, 3}));
  EXPECT_EQ(apply_pipeline_choice(p, 3, 9).split, (std::vector<int>{3, 2, 4}));
  EXPECT_EQ(apply_pipeline_choice(p, 4, 9).split, (std::vector<int>{3, 4, 2}));
  EXPECT_THROW(apply_pipeline_choice(p, 5, 9), std::out_of_range);
  // A move and its reverse give back the even pipeline, split left empty.
  EXPECT_EQ(apply_pipeline_choice(apply_pipeline_choice(p, 1, 9), 2, 9), p);
  const Pipeline far = Pipeline::parse("pp(p=3,m=6,split=5/1/3)");
  EXPECT_EQ(pipeline_choice_toward(p, far, 9), 2);    // boundary 0 later
  EXPECT_EQ(pipeline_choice_toward(far, p, 9), 1);    // and back
  EXPECT_EQ(pipeline_choice_toward(p, p, 9), 0);
  EXPECT_EQ(pipeline_choice_toward(p, Pipeline::parse("pp(p=3,m=3)"), 9), 0);  // not a split
}

TEST(PipelineAction, OneStageKeepsTheActionSpaceAsItWas) {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/8);
  spec.catalog.max_pipeline_stages = 4;  // fits with one stage: the rule keeps p = 1
  auto env = sim_env(spec);
  const EnvSpec& s = env->spec();
  const int B = 16, K = s.catalog_size;
  EXPECT_EQ(s.pipeline_stages, 1);
  EXPECT_EQ(s.action_space.nvec, std::vector<int64_t>(B, K));
  EXPECT_EQ(s.observation_space.flat_size(),
            B * PartitionEnv::kBlockFeatures + PartitionEnv::kGlobalFixed + 2);
  EXPECT_EQ(env->initial_plan(), resolve_plan("megatron", spec.model, spec.cluster));
  env->reset(0);
  EXPECT_EQ(env->action_mask().size(), static_cast<size_t>(B * K));
  EXPECT_EQ(IncrementalAction(sim_env(spec)).spec().action_space.nvec[0], 1 + B * K);
}

TEST(PipelineAction, PipelinedEnvAddsTheComponent) {
  auto env = sim_env(test_specs::pipelined(/*layers=*/8, /*stages=*/4));
  const EnvSpec& s = env->spec();
  const int B = 16, K = s.catalog_size;
  EXPECT_EQ(s.pipeline_stages, 4);
  ASSERT_EQ(s.action_space.nvec.size(), static_cast<size_t>(B + 1));
  EXPECT_EQ(s.action_space.nvec.back(), 7);
  const int dim = B * PartitionEnv::kBlockFeatures + PartitionEnv::kGlobalFixed + 2 + 7;
  EXPECT_EQ(s.observation_space.flat_size(), dim);
  ResetResult r = env->reset(0);
  EXPECT_EQ(env->action_mask().size(), static_cast<size_t>(B * K + 7));
  EXPECT_EQ(split_from_observation(r.obs, 4, 8), (std::vector<int>{2, 2, 2, 2}));
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(r.obs[dim - 7 + i], (i + 1) * 0.25f);
  for (int i = 3; i < 7; ++i) EXPECT_GT(r.obs[dim - 7 + i], 0.0f) << "stage memory";

  // Move boundary 1 one layer later: stage 1 takes stage 2's first layer.
  Action a = env->action_from_plan(env->run().plan());
  EXPECT_EQ(a.back(), 0);
  a.back() = 4;
  Plan want = env->plan_from_action(a);
  EXPECT_EQ(want.pipeline.split, (std::vector<int>{2, 3, 1, 2}));
  EXPECT_EQ(env->action_from_plan(want), a);
  StepResult st = env->step(a);
  ASSERT_TRUE(st.info.error.empty()) << st.info.error;
  EXPECT_EQ(st.info.plan.pipeline.split, (std::vector<int>{2, 3, 1, 2}));
  EXPECT_EQ(split_from_observation(st.obs, 4, 8), (std::vector<int>{2, 3, 1, 2}));
  EXPECT_GT(st.info.measurement.repartition_s, 0.0) << "the moved layer's state travels";
  Plan far = want;
  far.pipeline.split = {4, 1, 1, 2};
  EXPECT_THROW(env->action_from_plan(far), std::invalid_argument);
}

// A failed step keeps the measured entries of the observation, each stage's peak memory
// included; the boundaries and the step counter still describe the step. (The step fails
// because a sequence-length event makes the sp plan in force shape-invalid: 2 ∤ 31.)
TEST(PipelineAction, AFailedStepKeepsEachStagesMeasuredMemory) {
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  spec.initial_plan = "uniform:tp1d(t=2,sp=1)@pp(p=2,m=4)";
  ScenarioEvent seq;
  seq.step = 3, seq.kind = EventKind::kSeqLength, seq.value = 31;  // the third env step
  test_specs::add_event(spec, seq);
  auto env = sim_env(spec);
  env->reset(0);
  const Action keep = env->action_from_plan(env->run().plan());
  Action move = keep;
  move.back() = 1;  // a boundary move: the stages' memory changes
  const StepResult first = env->step(move);
  ASSERT_TRUE(first.info.error.empty()) << first.info.error;
  const StepResult ok = env->step(env->action_from_plan(env->run().plan()));
  ASSERT_TRUE(ok.info.error.empty()) << ok.info.error;
  const StepResult bad = env->step(env->action_from_plan(env->run().plan()));
  ASSERT_FALSE(bad.info.error.empty());
  EXPECT_TRUE(bad.truncated);
  const int dim = static_cast<int>(ok.obs.size()), g = 16 * PartitionEnv::kBlockFeatures;
  ASSERT_EQ(bad.obs.size(), ok.obs.size());
  for (int i = 0; i < dim; ++i) {
    if (i == g) continue;  // step / steps
    EXPECT_EQ(bad.obs[i], ok.obs[i]) << "entry " << i;
  }
  EXPECT_GT(bad.obs[g], ok.obs[g]);
  for (int i = dim - 2; i < dim; ++i) EXPECT_GT(bad.obs[i], 0.0f) << "stage memory, entry " << i;
  EXPECT_NE(ok.obs[dim - 2], ok.obs[dim - 1]) << "the stages hold different bytes";
}

TEST(PipelineAction, AMoveThatEmptiesAStageIsMasked) {
  // Two layers in two stages: every move empties a stage.
  auto env = sim_env(test_specs::pipelined(/*layers=*/2, /*stages=*/2));
  env->reset(0);
  const int BK = 4 * env->spec().catalog_size;
  const std::vector<uint8_t> mask = env->action_mask();
  ASSERT_EQ(mask.size(), static_cast<size_t>(BK + 3));
  EXPECT_EQ(mask[BK + 0], 1) << "keeping the boundaries is always allowed";
  EXPECT_EQ(mask[BK + 1], 0);
  EXPECT_EQ(mask[BK + 2], 0);
  Action a = env->action_from_plan(env->run().plan());
  a.back() = 1;
  EXPECT_THROW(env->step(a), std::invalid_argument);
}

TEST(PipelineAction, AMoveThatOverfillsAStageIsMasked) {
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  SimRun probe(spec);
  const Plan even = probe.plan();
  Plan later = even;
  later.pipeline = apply_pipeline_choice(even.pipeline, 2, 8);  // stage 0 takes a layer
  Plan earlier = even;
  earlier.pipeline = apply_pipeline_choice(even.pipeline, 1, 8);  // stage 1 takes a layer
  const double a = peak_of(spec, even), b = peak_of(spec, later), c = peak_of(spec, earlier);
  ASSERT_LT(a, b);
  const double capacity = (a + b) / 2;
  spec.cluster.devices[0].memory_bytes = capacity;
  auto env = sim_env(spec);
  env->reset(0);
  const int BK = 16 * env->spec().catalog_size;
  const std::vector<uint8_t> mask = env->action_mask();
  EXPECT_EQ(mask[BK + 2], 0) << "stage 0 with 5 layers does not fit";
  EXPECT_EQ(mask[BK + 1], c <= capacity ? 1 : 0);
  EXPECT_EQ(mask[BK + 0], 1);
}

// Property: over random episodes, every allowed move gives a valid plan that fits, every masked
// one empties a stage, is invalid or does not fit; stepping allowed actions never fails.
TEST(PipelineAction, ABoundaryMoveKeepsThePlanValidOrIsMasked) {
  for (int stages : {2, 4}) {
    ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, stages);
    spec.steps_per_episode = 40;
    // Tight memory: the even plan fits, some uneven ones do not.
    spec.cluster.devices[0].memory_bytes = 1.3 * peak_of(spec, SimRun(spec).plan());
    auto env = sim_env(spec);
    const int B = 16, K = env->spec().catalog_size, n = pipeline_choices(stages);
    std::mt19937_64 rng(stages);
    int moves = 0, masked_moves = 0;
    for (uint64_t episode = 0; episode < 3; ++episode) {
      env->reset(episode);
      for (int t = 0; t < spec.steps_per_episode; ++t) {
        const std::vector<uint8_t> mask = env->action_mask();
        ASSERT_EQ(mask.size(), static_cast<size_t>(B * K + n));
        const Plan now = env->run().plan();
        for (int c = 1; c < n; ++c) {
          Plan p = now;
          p.pipeline = apply_pipeline_choice(now.pipeline, c, 8);
          const bool valid = p.validate(spec.model, 4).empty();
          const bool fits = valid && plan_fits(env->run(), p);
          EXPECT_EQ(mask[B * K + c], fits ? 1 : 0) << p.to_string();
          masked_moves += mask[B * K + c] == 0;
        }
        // Mostly boundary moves, sometimes a block change too.
        Action a = env->action_from_plan(now);
        std::vector<int> allowed;
        for (int c = 0; c < n; ++c)
          if (mask[B * K + c]) allowed.push_back(c);
        a[B] = allowed[rng() % allowed.size()];
        if (a[B] == 0) {
          const int b = static_cast<int>(rng() % B);
          for (int k = 0; k < K; ++k)
            if (mask[b * K + k] && rng() % 4 == 0) a[b] = k;
        }
        moves += a[B] != 0;
        StepResult r = env->step(a);
        ASSERT_TRUE(r.info.error.empty()) << r.info.error;
        ASSERT_FALSE(r.info.measurement.oom) << r.info.plan.to_string();
        EXPECT_EQ(r.info.plan.validate(spec.model, 4), "") << r.info.plan.to_string();
      }
    }
    EXPECT_GT(moves, 20) << "stages " << stages;
    EXPECT_GT(masked_moves, 0) << "stages " << stages;
  }
}

TEST(PipelineAction, IncrementalActionOffersTheMoves) {
  IncrementalAction env(sim_env(test_specs::pipelined(/*layers=*/8, /*stages=*/2)));
  const int B = 16, K = env.spec().catalog_size;
  EXPECT_EQ(env.spec().action_space.nvec[0], 1 + B * K + 2);
  env.reset(0);
  const std::vector<uint8_t> mask = env.action_mask();
  ASSERT_EQ(mask.size(), static_cast<size_t>(1 + B * K + 2));
  const int later = 1 + B * K + 1;  // pipeline choice 2: boundary 0 one layer later
  ASSERT_EQ(mask[later], 1);
  EXPECT_EQ(env.expand({later}).back(), 2);
  StepResult r = env.step({later});
  EXPECT_EQ(r.info.plan.pipeline.split, (std::vector<int>{5, 3}));
  EXPECT_EQ(env.expand({0}).back(), 0);
}

}  // namespace
}  // namespace shardgym
