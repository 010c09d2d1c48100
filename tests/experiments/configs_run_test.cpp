// Every config under experiments/ runs: it loads, its env is built with make_env, and its
// configured agent plays a few steps. Examples that stop working fail here, not in a user's
// terminal.
#include <cmath>
#include <filesystem>
#include <iostream>

#include <gtest/gtest.h>

#include "agents/agent.h"
#include "env/registry.h"
#include "experiments/config.h"
#include "tests/experiments/shipped_configs.h"
#include "runtime/core/training_run.h"

namespace shardgym {
namespace {

namespace fs = std::filesystem;

using testing::loadable_in_this_build;
using testing::shipped_configs;

constexpr int kSteps = 3;

TEST(ConfigsRunTest, EveryConfigPlaysAFewStepsWithItsAgent) {
  const auto configs = shipped_configs();
  ASSERT_GE(configs.size(), 5u);
  for (const auto& path : configs) {
    SCOPED_TRACE(path);
    ExperimentSpec spec;
    if (!loadable_in_this_build(path, &spec)) continue;
    std::unique_ptr<Env> env;
    try {
      env = make_env(spec.env_id, spec);
    } catch (const std::exception& e) {
      // A GPU config (live.device: cuda) on a CPU-only build or a machine without a GPU is
      // refused by name before any rank starts; scripts/gpu_checks.sh runs it where it can.
      const std::string why = e.what();
      if (spec.live.device != "cuda" || why.find("live.device / live.backend") == std::string::npos)
        throw;
      std::cout << "skipped, needs a GPU: " << path << " (" << why << ")\n";
      continue;
    }
    // Without LibTorch `ppo` cannot be created (its parameters were checked at load): such a
    // config is played by the static Megatron-LM baseline instead.
    std::string agent_id = spec.agent.id;
    if (!SHARDGYM_TEST_WITH_TORCH && ParsedId::parse(agent_id).name == "ppo") agent_id = "megatron";
    std::unique_ptr<Agent> agent = make_agent(agent_id, env->spec(), spec.seeds.front());
    ResetResult start = env->reset(spec.seeds.front());
    Observation obs = start.obs;
    std::vector<int32_t> plan = start.info.plan_indices;
    agent->begin_episode(*env);
    ASSERT_EQ(static_cast<int64_t>(obs.size()), env->spec().observation_space.flat_size());
    EXPECT_EQ(env->spec().num_blocks, spec.model.num_blocks());
    for (int t = 0; t < kSteps; ++t) {
      const Action a = agent->act(obs, env->action_mask(), plan);
      ASSERT_TRUE(env->spec().action_space.contains(a));
      StepResult r = env->step(a);
      agent->observe({obs, a, r.reward, r.obs, r.terminated, r.truncated, !r.info.error.empty()});
      EXPECT_TRUE(std::isfinite(r.reward));
      EXPECT_EQ(r.obs.size(), obs.size());
      if (!r.info.error.empty()) {
        // A plan the agent picked may fail (e.g. out of memory); that must end the episode.
        EXPECT_TRUE(r.truncated) << r.info.error;
        break;
      }
      EXPECT_GT(r.info.measurement.throughput(), 0);
      obs = std::move(r.obs);
      plan = std::move(r.info.plan_indices);
    }
  }
}

TEST(ConfigsRunTest, HeteroDynamicReachesItsLastPhase) {
  const ExperimentSpec spec = load_experiment(std::string(SHARDGYM_TEST_SOURCE_DIR) +
                                              "/experiments/scenarios/hetero-dynamic.yaml");
  std::unique_ptr<Env> env = make_env(spec.env_id, spec);
  env->reset(0);
  // Keep the initial (Megatron) plan: the action that repeats the plan in force.
  const Action keep = [&] {
    const std::vector<uint8_t> mask = env->action_mask();
    const int k = env->spec().catalog_size;
    Action a(env->spec().num_blocks);
    const StrategyCatalog& catalog = env->run().catalog();
    for (int b = 0; b < env->spec().num_blocks; ++b) {
      a[b] = catalog.index_of(env->run().plan().blocks[b]);
      EXPECT_TRUE(mask[static_cast<size_t>(b) * k + a[b]]);
    }
    return a;
  }();
  for (int t = 0; t < 12; ++t) ASSERT_TRUE(env->step(keep).info.error.empty());
  ASSERT_EQ(env->run().context().phase, 1);  // 256-token sequences
  const double short_seq = env->step(keep).info.measurement.step_latency_s;
  for (int t = 13; t < 77; ++t) ASSERT_TRUE(env->step(keep).info.error.empty());
  EXPECT_EQ(env->run().context().phase, 3);
  // A quarter of the inter-node bandwidth and a 1.5x straggler: the same plan at the same
  // sequence length gets slower (noise is σ = 2%, far below the slowdown).
  EXPECT_GT(env->step(keep).info.measurement.step_latency_s, short_seq);
}

}  // namespace
}  // namespace shardgym
