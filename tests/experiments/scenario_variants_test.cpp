// The scenario variants of experiments/scenarios/variants/ (docs/benchmarks.md, "Generalisation
// to unseen variants"): every variant loads and validates, differs from the original it is
// named after only in its scenario's events (or length draws), and so gives PPO the same
// observation and action layout, which is what lets a checkpoint trained on the original run on
// it. Every dynamic scenario has at least three variants.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "agents/agent.h"
#include "env/registry.h"
#include "experiments/config.h"

namespace shardgym {
namespace {

namespace fs = std::filesystem;

const fs::path kScenarios = fs::path(SHARDGYM_TEST_SOURCE_DIR) / "experiments" / "scenarios";

// Keys a variant may change: its names, where its dynamics come from, and the dynamics.
const std::set<std::string> kFreeTopLevel = {"name", "scenario", "include"};
const std::set<std::string> kFreeScenario = {"name", "source", "events", "seq_mix"};

void diff_nodes(const YAML::Node& a, const YAML::Node& b, const std::string& path,
                std::vector<std::string>& out) {
  if (a.Type() != b.Type()) {
    out.push_back(path + ": different kinds of node");
    return;
  }
  if (a.IsScalar()) {
    if (a.Scalar() != b.Scalar()) out.push_back(path + ": " + a.Scalar() + " vs " + b.Scalar());
  } else if (a.IsSequence()) {
    if (a.size() != b.size()) {
      out.push_back(path + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
                    " entries");
      return;
    }
    for (size_t i = 0; i < a.size(); ++i)
      diff_nodes(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
  } else if (a.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : a) keys.insert(kv.first.Scalar());
    for (const auto& kv : b) keys.insert(kv.first.Scalar());
    for (const std::string& k : keys) {
      if (!a[k] || !b[k]) {
        out.push_back(path + "." + k + ": only in one file");
        continue;
      }
      diff_nodes(a[k], b[k], path + "." + k, out);
    }
  }
}

// What differs between an original config and a variant beyond the keys a variant may change
// (`include` is compared as the file it resolves to). Empty: the variant is legitimate.
std::vector<std::string> forbidden_differences(const YAML::Node& original, const fs::path& orig_dir,
                                               const YAML::Node& variant, const fs::path& var_dir) {
  std::vector<std::string> out;
  std::set<std::string> keys;
  for (const auto& kv : original) keys.insert(kv.first.Scalar());
  for (const auto& kv : variant) keys.insert(kv.first.Scalar());
  for (const std::string& k : keys) {
    if (!original[k] || !variant[k]) {
      out.push_back(k + ": only in one file");
    } else if (k == "include") {
      const fs::path a = fs::weakly_canonical(orig_dir / original[k].Scalar());
      const fs::path b = fs::weakly_canonical(var_dir / variant[k].Scalar());
      if (a != b) out.push_back("include: " + a.string() + " vs " + b.string());
    } else if (k == "scenario") {
      const YAML::Node& so = original[k];
      const YAML::Node& sv = variant[k];
      if (!so.IsMap() || !sv.IsMap()) {
        out.push_back("scenario: not a map");
        continue;
      }
      std::set<std::string> skeys;
      for (const auto& kv : so) skeys.insert(kv.first.Scalar());
      for (const auto& kv : sv) skeys.insert(kv.first.Scalar());
      for (const std::string& s : skeys) {
        if (kFreeScenario.count(s)) continue;
        if (!so[s] || !sv[s]) {
          out.push_back("scenario." + s + ": only in one file");
          continue;
        }
        diff_nodes(so[s], sv[s], "scenario." + s, out);
      }
    } else if (!kFreeTopLevel.count(k)) {
      diff_nodes(original[k], variant[k], k, out);
    }
  }
  return out;
}

// experiments/scenarios/NAME.yaml for a variant NAME-SOMETHING.yaml (the longest such NAME).
fs::path original_of(const fs::path& variant) {
  const std::string stem = variant.stem().string();
  fs::path best;
  for (const auto& e : fs::directory_iterator(kScenarios)) {
    if (e.path().extension() != ".yaml") continue;
    const std::string name = e.path().stem().string();
    if (stem.rfind(name + "-", 0) == 0 && name.size() > best.stem().string().size())
      best = e.path();
  }
  return best;
}

std::vector<fs::path> variant_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kScenarios / "variants"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ScenarioVariants, EveryDynamicScenarioHasAtLeastThree) {
  std::map<std::string, int> count;
  for (const fs::path& v : variant_files()) ++count[original_of(v).stem().string()];
  int dynamic = 0;
  for (const auto& e : fs::directory_iterator(kScenarios)) {
    if (e.path().extension() != ".yaml") continue;
    if (load_experiment(e.path().string()).scenario.events.empty()) continue;
    ++dynamic;
    EXPECT_GE(count[e.path().stem().string()], 3) << e.path();
  }
  EXPECT_GE(dynamic, 4);  // hetero-dynamic, periodic-congestion, seq-mix-corpus, stragglers-come-go
}

TEST(ScenarioVariants, EachLoadsAndDiffersFromItsOriginalOnlyInScenarioEvents) {
  const std::vector<fs::path> variants = variant_files();
  ASSERT_GE(variants.size(), 12u);
  for (const fs::path& v : variants) {
    SCOPED_TRACE(v.string());
    const fs::path orig = original_of(v);
    ASSERT_FALSE(orig.empty()) << "no experiments/scenarios/NAME.yaml that the name starts with";
    const ExperimentSpec a = load_experiment(orig.string());  // throws on an invalid config
    const ExperimentSpec b = load_experiment(v.string());
    EXPECT_EQ(b.name, v.stem().string());

    const std::vector<std::string> diff =
        forbidden_differences(YAML::LoadFile(orig.string()), orig.parent_path(),
                              YAML::LoadFile(v.string()), v.parent_path());
    for (const std::string& d : diff)
      ADD_FAILURE() << "differs outside the scenario's events: " << d;
    EXPECT_EQ(a.scenario.noise, b.scenario.noise);

    // The events themselves differ (after expansion of `every` and `seq_mix`).
    ASSERT_FALSE(b.scenario.events.empty());
    bool same = a.scenario.events.size() == b.scenario.events.size();
    for (size_t i = 0; same && i < a.scenario.events.size(); ++i) {
      const ScenarioEvent& x = a.scenario.events[i];
      const ScenarioEvent& y = b.scenario.events[i];
      same = x.step == y.step && x.kind == y.kind && x.target == y.target && x.rank == y.rank &&
             x.factor == y.factor && x.value == y.value;
    }
    EXPECT_FALSE(same) << "the variant's events are the original's";

    // The same env layout, so a policy trained on the original can act on the variant.
    const auto ea = make_env(a.env_id, a);
    const auto eb = make_env(b.env_id, b);
    EXPECT_EQ(ea->spec().num_blocks, eb->spec().num_blocks);
    EXPECT_EQ(ea->spec().catalog_size, eb->spec().catalog_size);
    EXPECT_EQ(ea->spec().observation_space.flat_size(), eb->spec().observation_space.flat_size());
  }
}

// What scripts/reproduce/generalisation.sh does: a PPO checkpoint saved on the original loads on each of
// its variants and acts there (PPO::load checks blocks, catalog and observation size).
TEST(ScenarioVariants, APpoCheckpointOfTheOriginalLoadsOnEachVariant) {
  if (!SHARDGYM_TEST_WITH_TORCH) GTEST_SKIP() << "ppo needs LibTorch (SHARDGYM_WITH_TORCH=OFF)";
  const fs::path dir =
      fs::temp_directory_path() / ("shardgym_scenario_variants_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  std::map<fs::path, fs::path> checkpoints;  // original -> its PPO checkpoint
  for (const fs::path& v : variant_files()) {
    SCOPED_TRACE(v.string());
    const fs::path orig = original_of(v);
    if (!checkpoints.count(orig)) {
      const ExperimentSpec a = load_experiment(orig.string());
      const auto env = make_env(a.env_id, a);
      const fs::path ckpt = dir / (orig.stem().string() + ".ckpt");
      make_agent("ppo", env->spec(), 0)->save(ckpt.string());
      checkpoints[orig] = ckpt;
    }
    const ExperimentSpec b = load_experiment(v.string());
    const auto env = make_env(b.env_id, b);
    std::unique_ptr<Agent> agent = make_agent("ppo", env->spec(), 1);
    ASSERT_NO_THROW(agent->load(checkpoints[orig].string()));
    const ResetResult start = env->reset(0);
    agent->begin_episode(*env);
    EXPECT_TRUE(env->spec().action_space.contains(
        agent->act(start.obs, env->action_mask(), start.info.plan_indices)));
  }
  fs::remove_all(dir);
}

// The comparison is not vacuous: a change outside the scenario is found, one inside is not.
TEST(ScenarioVariants, ComparisonFindsChangesOutsideTheScenario) {
  const YAML::Node original = YAML::Load(
      "name: a\ninclude: ../hardware.yaml\nmodel: {layers: 24, hidden: 4096}\n"
      "scenario: {name: s, noise: 0.02, events: [{step: 10, kind: seq_length, value: 256}]}\n");
  const fs::path dir = kScenarios;
  const YAML::Node events_only = YAML::Load(
      "name: b\ninclude: ../../hardware.yaml\nmodel: {layers: 24, hidden: 4096}\n"
      "scenario: {name: t, noise: 0.02, events: [{step: 5, kind: seq_length, value: 128}]}\n");
  EXPECT_TRUE(forbidden_differences(original, dir, events_only, dir / "variants").empty());

  const YAML::Node model = YAML::Load(
      "name: b\ninclude: ../../hardware.yaml\nmodel: {layers: 32, hidden: 4096}\n"
      "scenario: {name: t, noise: 0.02, events: [{step: 5, kind: seq_length, value: 128}]}\n");
  EXPECT_EQ(forbidden_differences(original, dir, model, dir / "variants"),
            std::vector<std::string>{"model.layers: 24 vs 32"});

  const YAML::Node noise = YAML::Load(
      "name: b\ninclude: ../../hardware.yaml\nmodel: {layers: 24, hidden: 4096}\n"
      "scenario: {name: t, noise: 0.05, events: [{step: 10, kind: seq_length, value: 256}]}\n");
  EXPECT_EQ(forbidden_differences(original, dir, noise, dir / "variants"),
            std::vector<std::string>{"scenario.noise: 0.02 vs 0.05"});

  const YAML::Node other_catalog = YAML::Load(
      "name: b\ninclude: ../hardware.yaml\nmodel: {layers: 24, hidden: 4096}\n"
      "scenario: {name: t, noise: 0.02, events: [{step: 10, kind: seq_length, value: 256}]}\n");
  EXPECT_EQ(forbidden_differences(original, dir, other_catalog, dir / "variants").size(), 1u);
}

}  // namespace
}  // namespace shardgym
