// Synthetic transitions for trace tests: every value is a closed-form function of
// (episode, step, index), so a test (or tests/datasets/read_trace.py, which repeats the same
// formulas) can check a file element by element without keeping what was written.
// No simulator and no env implementation: EnvSpec / ResetResult / StepResult are built here.
//
// Length: the closed forms and the writers that use them stay together, since
// read_trace.py repeats the same formulas and a reader checks them side by side.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "datasets/trace.h"
#include "datasets/trace_reader.h"
#include "datasets/trace_writer.h"
#include "env/env.h"

namespace shardgym::tracetest {

inline constexpr int kBlocks = 4;   // B
inline constexpr int kWorld = 4;    // P
inline constexpr int kChoices = 5;  // K of the action space

// Episode e has 3 + 2e steps; odd episodes end truncated, even ones terminated.
inline int steps_of(int e) { return 3 + 2 * e; }

inline const std::vector<std::string>& strategy_texts() {
  static const std::vector<std::string> texts = {"dp", "tp1d(t=2)", "tp1d(t=4)",
                                                 "tp2d(d1=2,d2=2,first=row)"};
  return texts;
}

inline EnvSpec env_spec() {
  EnvSpec s;
  s.id = "shardgym/TPTest-v0";
  s.action_space = Space::multi_discrete("action", std::vector<int64_t>(kBlocks, kChoices));
  s.num_blocks = kBlocks;
  s.catalog_size = kChoices;
  s.backend = "sim";
  return s;
}

inline std::vector<float> obs(int e, int row, int dim) {
  std::vector<float> o(dim);
  for (int j = 0; j < dim; ++j) o[j] = static_cast<float>(e + row * 0.01 + j * 0.001);
  return o;
}

// Strategy of block b after step t of episode e (t = -1: the initial plan).
inline std::string strategy_at(int e, int t, int b) {
  return strategy_texts()[(e + t + 1 + b) % strategy_texts().size()];
}

inline Plan plan_at(int e, int t) {
  Plan p;
  for (int b = 0; b < kBlocks; ++b) p.blocks.push_back(Strategy::parse(strategy_at(e, t, b)));
  return p;
}

inline Measurement measurement(int e, int t) {
  Measurement m;
  m.step_latency_s = 0.1 + e + t * 1e-3;
  m.repartition_s = t * 1e-4;
  m.repartition_bytes = t * 1e6;
  m.repartition_peak_bytes = t * 3e5;
  m.energy_j = 100.0 + t;
  m.tokens = 4096;
  m.loss = 5.0 - t * 0.01;
  for (int b = 0; b < kBlocks; ++b) {
    m.block_fwd_s.push_back(1e-3 * (b + 1) + t * 1e-6 + e);
    m.block_bwd_s.push_back(2e-3 * (b + 1) + t * 1e-6 + e);
    m.block_comm_s.push_back(0.5e-3 * b + t * 1e-6);
  }
  for (int p = 0; p < kWorld; ++p) m.peak_memory_bytes.push_back(1e9 * (p + 1) + t * 1e3 + e);
  m.latency_source = "wallclock";
  m.memory_source = "allocator";
  m.energy_source = "model";
  return m;
}

inline ResetResult reset_result(int e, int dim) {
  ResetResult r;
  r.obs = obs(e, 0, dim);
  r.info.measurement = measurement(e, -1);
  r.info.plan = plan_at(e, -1);
  return r;
}

inline Action action(int e, int t) {
  Action a(kBlocks);
  for (int b = 0; b < kBlocks; ++b) a[b] = (e + t + b) % kChoices;
  return a;
}

inline StepResult step_result(int e, int t, int dim) {
  StepResult r;
  r.obs = obs(e, t + 1, dim);
  r.reward = -(e * 1000.0 + t + 0.25);
  const bool last = t == steps_of(e) - 1;
  r.terminated = last && e % 2 == 0;
  r.truncated = last && e % 2 == 1;
  r.info.measurement = measurement(e, t);
  r.info.plan = plan_at(e, t);
  r.info.scalars["raw_reward"] = 2 * r.reward;
  if (t >= 2) r.info.scalars["baseline/latency_s"] = 0.5 + t;  // '/' becomes '_' in the file
  return r;
}

inline TraceMetadata metadata() {
  TraceMetadata m;
  m.env_id = "shardgym/TPTest-v0";
  m.config = "name: trace-test\nmodel: {layers: 2}\n";
  m.git_sha = "0123abcd";
  m.agent = "random";
  m.world = kWorld;
  m.strategies = {"dp"};  // the rest is appended as plans meet them
  return m;
}

// Writes `episodes` full episodes.
inline void write_episodes(TraceWriter& w, int first, int episodes, int dim) {
  for (int e = first; e < first + episodes; ++e) {
    w.begin_episode(env_spec(), 100 + e, reset_result(e, dim));
    for (int t = 0; t < steps_of(e); ++t) w.record_step(action(e, t), step_result(e, t, dim));
    w.end_episode();
  }
}

// Checks a read-back episode against the formulas, element by element (exact: the file
// stores the same binary values that were written).
inline void expect_episode(const TraceEpisode& ep, const std::vector<std::string>& table, int e,
                           int dim) {
  const int n = steps_of(e);
  SCOPED_TRACE("episode " + std::to_string(e));
  EXPECT_TRUE(ep.info.complete);
  EXPECT_EQ(ep.info.seed, static_cast<uint64_t>(100 + e));
  EXPECT_EQ(ep.info.agent, "random");
  EXPECT_EQ(ep.info.backend, "sim");
  EXPECT_EQ(ep.info.initial_plan, plan_at(e, -1).to_string());
  ASSERT_EQ(ep.steps(), n);
  ASSERT_EQ(ep.obs_dim, dim);
  ASSERT_EQ(ep.num_blocks, kBlocks);
  ASSERT_EQ(ep.world, kWorld);
  ASSERT_EQ(ep.action_dim, kBlocks);
  for (int row = 0; row <= n; ++row) {
    const auto o = obs(e, row, dim);
    for (int j = 0; j < dim; ++j)
      ASSERT_EQ(ep.observations[row * dim + j], o[j]) << row << "," << j;
  }
  for (int t = 0; t < n; ++t) {
    const StepResult r = step_result(e, t, dim);
    const Measurement want = r.info.measurement;
    const Measurement got = ep.measurement(t);
    EXPECT_EQ(ep.rewards[t], r.reward);
    EXPECT_EQ(ep.terminations[t] != 0, r.terminated);
    EXPECT_EQ(ep.truncations[t] != 0, r.truncated);
    for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(ep.actions[t * kBlocks + b], action(e, t)[b]);
    EXPECT_EQ(got.step_latency_s, want.step_latency_s);
    EXPECT_EQ(got.repartition_s, want.repartition_s);
    EXPECT_EQ(got.repartition_bytes, want.repartition_bytes);
    EXPECT_EQ(got.repartition_peak_bytes, want.repartition_peak_bytes);
    EXPECT_EQ(got.energy_j, want.energy_j);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.loss, want.loss);
    EXPECT_EQ(got.block_fwd_s, want.block_fwd_s);
    EXPECT_EQ(got.block_bwd_s, want.block_bwd_s);
    EXPECT_EQ(got.block_comm_s, want.block_comm_s);
    EXPECT_EQ(got.peak_memory_bytes, want.peak_memory_bytes);
    EXPECT_TRUE(got.ok);
    EXPECT_EQ(got.latency_source, "wallclock");
    EXPECT_EQ(got.memory_source, "allocator");
    EXPECT_EQ(got.energy_source, "model");
    EXPECT_EQ(ep.plan(t, table), plan_at(e, t)) << "step " << t;
    EXPECT_EQ(ep.scalars.at("raw_reward")[t], 2 * r.reward);
    const double base = ep.scalars.at("baseline_latency_s")[t];
    if (t >= 2) {
      EXPECT_EQ(base, 0.5 + t);
    } else {
      EXPECT_TRUE(std::isnan(base)) << "a scalar absent at step " << t << " reads as NaN";
    }
  }
  const Measurement m0 = measurement(e, -1);
  EXPECT_EQ(ep.initial.step_latency_s, m0.step_latency_s);
  EXPECT_EQ(ep.initial.block_fwd_s, m0.block_fwd_s);
  EXPECT_EQ(ep.initial.peak_memory_bytes, m0.peak_memory_bytes);
  EXPECT_EQ(ep.initial.latency_source, "wallclock");
}

// A fresh scratch directory under the build tree (or /tmp): test-scratch/datasets/<name>.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const char* bin = std::getenv("SHARDGYM_BINARY_DIR");
  std::filesystem::path dir =
      std::filesystem::path(bin ? bin : "/tmp") / "test-scratch" / "datasets" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The message of the runtime_error that opening `path` and reading its complete episodes
// throws ("" if none was thrown).
inline std::string open_error(const std::string& path) {
  try {
    TraceReader r(path);
    for (const auto& info : r.episodes())
      if (info.complete) r.read_episode(info.index);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// A test with its own scratch directory (scratch_dir of the test's name) and paths in it.
class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

}  // namespace shardgym::tracetest
