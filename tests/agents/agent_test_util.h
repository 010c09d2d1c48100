// Shared pieces of the agent tests: small simulated experiments and a rollout that checks
// every action against the env's mask before stepping.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agents/agent.h"
#include "agents/agent_util.h"
#include "env/registry.h"
#include "tests/env/test_specs.h"

namespace shardgym::agent_tests {

// A path in the temp directory unique to this process: <prefix><pid>_<tag>.
inline std::string temp_path(const std::string& prefix, const std::string& tag) {
  return (std::filesystem::temp_directory_path() /
          (prefix + std::to_string(::getpid()) + "_" + tag))
      .string();
}

// A file's bytes.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A tiny GPT on 4 simulated GPUs with a link drop halfway through the episode.
inline ExperimentSpec sim_spec(int layers = 2, int steps = 12) {
  ExperimentSpec s = test_specs::tiny(layers, /*gpus_per_node=*/4, /*nodes=*/1);
  s.steps_per_episode = steps;
  test_specs::add_link_drop(s, steps / 2, "nvlink", 0.1);
  return s;
}

inline std::unique_ptr<Env> sim_env(const ExperimentSpec& spec) {
  return make_env("shardgym/TPSim-v0", spec);
}

struct Rollout {
  std::vector<Action> actions;
  std::vector<double> rewards;
  int invalid = 0;          // actions that the mask did not allow (a block kept where its
                            // row allows nothing is allowed: the env's contract)
  int64_t masked_seen = 0;  // masked entries over every mask the agent was given
  int failed = 0;           // steps that came back with an error
};

// Runs `episodes` episodes (env seeds seed, seed+1, ...); observe() every step, update() when
// `learn`. Counts actions outside the mask instead of stepping them. A failed or
// out-of-memory step ends the episode (as run_episode does).
inline Rollout rollout(Env& env, Agent& agent, uint64_t seed, int episodes, bool learn) {
  Rollout out;
  const int K = env.spec().catalog_size;
  for (int e = 0; e < episodes; ++e) {
    ResetResult start = env.reset(seed + e);
    Observation obs = std::move(start.obs);
    std::vector<int32_t> plan = std::move(start.info.plan_indices);
    agent.begin_episode(env);
    agent.set_training(learn);
    while (true) {
      const std::vector<uint8_t> mask = env.action_mask();
      for (uint8_t m : mask) out.masked_seen += m == 0;
      Action a = agent.act(obs, mask, plan);
      out.actions.push_back(a);
      // The env takes a block kept as it is whatever its row says (partition_env.h): where a
      // row allows nothing (the plan in force no longer fits), keeping is the only action.
      std::vector<uint8_t> open = mask;
      for (size_t b = 0; b < plan.size() && b < a.size(); ++b) {
        const auto row = mask.begin() + static_cast<std::ptrdiff_t>(b * K);
        if (plan[b] >= 0 && a[b] == plan[b] && std::none_of(row, row + K, [](uint8_t m) {
              return m != 0;
            }))
          open[b * K + plan[b]] = 1;
      }
      const bool allowed = agents_detail::action_allowed(a, open, K);
      if (!allowed) {
        ++out.invalid;
        return out;
      }
      StepResult r = env.step(a);
      out.rewards.push_back(r.reward);
      const bool failed = !r.info.error.empty() || r.info.measurement.oom;
      out.failed += failed;
      agent.observe({obs, a, r.reward, r.obs, r.terminated, r.truncated || failed, failed});
      if (learn) agent.update();
      obs = r.obs;
      plan = r.info.plan_indices;
      if (r.terminated || r.truncated || failed) break;
    }
  }
  return out;
}

}  // namespace shardgym::agent_tests
