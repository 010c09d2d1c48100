#include "env/registry.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <variant>

#include <gtest/gtest.h>

#include "env/partition_env.h"
#include "env/wrappers.h"
#include "tests/env/fake_run.h"
#include "tests/env/test_specs.h"

namespace shardgym {
namespace {

std::unique_ptr<Env> make_fake(const ExperimentSpec& spec) {
  return std::make_unique<PartitionEnv>("test/RegistryFake-v0",
                                        std::make_unique<envtest::FakeRun>(spec), spec);
}

// A fake with one option of each kind of field and a check across two keys.
EnvType fake_type() {
  EnvType t{"test/RegistryFake-v0", "FakeRun for the registry test", make_fake};
  t.options = {EnvOption::real(
                   "lr", "live.extra.lr", "a number in [0, 1]",
                   [](ExperimentSpec& s) -> double& { return s.live.extra.lr; }, 0, 1),
               EnvOption::integer(
                   "ranks", "live.ranks", "an int in [1, 8]",
                   [](ExperimentSpec& s) -> int& { return s.live.ranks; }, 1, 8)};
  t.validate = [](const ExperimentSpec& s) {
    if (s.live.ranks == 3) throw EnvOptionError("live.ranks", "3 is refused by the fake");
  };
  return t;
}
REGISTER_SHARDGYM_ENV(fake_type());
REGISTER_SHARDGYM_ENV(EnvType({"test/AnotherFake-v0", "a second id, to check the order",
                               make_fake}));

TEST(EnvRegistry, ListsRegisteredIdsSorted) {
  const std::vector<std::string> ids = registered_env_ids();
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_NE(std::find(ids.begin(), ids.end(), "test/RegistryFake-v0"), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), "test/AnotherFake-v0"), ids.end());
  EXPECT_TRUE(env_registered("test/RegistryFake-v0"));
  EXPECT_FALSE(env_registered("test/Nope-v0"));
  EXPECT_EQ(env_description("test/RegistryFake-v0"), "FakeRun for the registry test");
}

TEST(EnvRegistry, UnknownIdsNameTheKnownOnes) {
  try {
    make_bare_env("test/Nope-v0", test_specs::tiny());
    FAIL() << "an unknown id must throw";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test/Nope-v0"), std::string::npos) << what;
    EXPECT_NE(what.find("test/AnotherFake-v0, "), std::string::npos) << what;
    EXPECT_NE(what.find("test/RegistryFake-v0"), std::string::npos) << what;
  }
  EXPECT_THROW(env_description("test/Nope-v0"), std::invalid_argument);
}

TEST(EnvRegistry, DuplicateRegistrationIsRefused) {
  EXPECT_THROW(EnvRegistration({"test/RegistryFake-v0", "again", make_fake}), std::logic_error);
  EXPECT_THROW(EnvRegistration({"", "empty", make_fake}), std::logic_error);
  EXPECT_THROW(EnvRegistration({"test/NoFactory-v0", "no factory", nullptr}), std::logic_error);
  EnvType nameless{"test/Nameless-v0", "an option without a name", make_fake};
  nameless.options.push_back(fake_type().options[0]);
  nameless.options.back().name = "";
  EXPECT_THROW(EnvRegistration{nameless}, std::logic_error);
  EXPECT_FALSE(env_registered("test/Nameless-v0"));
}

TEST(EnvRegistry, MakeEnvBuildsTheStandardStack) {
  ExperimentSpec spec = test_specs::tiny();
  spec.steps_per_episode = 7;
  std::unique_ptr<Env> env = make_env("test/RegistryFake-v0", spec);
  auto* limit = dynamic_cast<TimeLimit*>(env.get());
  ASSERT_NE(limit, nullptr) << "TimeLimit outermost";
  EXPECT_EQ(env->spec().max_episode_steps, 7);
  auto* normalize = dynamic_cast<NormalizeReward*>(&limit->inner());
  ASSERT_NE(normalize, nullptr);
  EXPECT_NE(dynamic_cast<PartitionEnv*>(&normalize->inner()), nullptr);
  env->reset(0);
  const Action megatron(4, 3);
  EXPECT_DOUBLE_EQ(env->step(megatron).reward, 1.0) << "normalised against Megatron";

  spec.reward.normalize = false;
  spec.steps_per_episode = 0;
  std::unique_ptr<Env> bare = make_env("test/RegistryFake-v0", spec);
  EXPECT_NE(dynamic_cast<PartitionEnv*>(bare.get()), nullptr);
  EXPECT_NE(dynamic_cast<PartitionEnv*>(make_bare_env("test/RegistryFake-v0", spec).get()),
            nullptr);
}

}  // namespace
}  // namespace shardgym

namespace shardgym {
namespace {

const EnvOption& option_named(const std::vector<EnvOption>& options, const std::string& name) {
  for (const EnvOption& o : options)
    if (o.name == name) return o;
  throw std::out_of_range("no option " + name);
}

// The key an EnvOptionError names, or "" when `body` does not throw one.
std::string error_key(const std::function<void()>& body) {
  try {
    body();
  } catch (const EnvOptionError& e) {
    return e.key();
  }
  return "";
}

TEST(EnvOptions, EveryEnvHasTheCommonOptionsFirstThenItsOwn) {
  const std::vector<EnvOption> options = env_options("test/RegistryFake-v0");
  ASSERT_EQ(options.size(), common_env_options().size() + 2);
  EXPECT_EQ(options[0].name, "steps_per_episode");
  EXPECT_EQ(option_named(options, "normalize_reward").config_key, "reward.normalize");
  EXPECT_EQ(options.back().name, "ranks");
  // Defaults are the spec's initializers, read through the option.
  const ExperimentSpec defaults;
  EXPECT_EQ(std::get<int64_t>(option_named(options, "steps_per_episode").default_value()),
            defaults.steps_per_episode);
  EXPECT_EQ(std::get<double>(option_named(options, "lr").default_value()), defaults.live.extra.lr);
  EXPECT_EQ(option_value_text(option_named(options, "normalize_reward").default_value()), "true");
  EXPECT_EQ(option_value_text(option_named(options, "initial_plan").default_value()),
            "\"megatron\"");
}

TEST(EnvOptions, SetChecksTypeAndRangeAndNamesTheKey) {
  ExperimentSpec spec = test_specs::tiny();
  spec.env_id = "test/RegistryFake-v0";
  set_env_option(spec, "lr", 0.5);
  EXPECT_EQ(spec.live.extra.lr, 0.5);
  set_env_option(spec, "lr", int64_t{1});  // an int for a double is widened
  EXPECT_EQ(spec.live.extra.lr, 1.0);
  set_env_option(spec, "ranks", int64_t{8});
  EXPECT_EQ(spec.live.ranks, 8);
  set_env_option(spec, "normalize_reward", false);
  EXPECT_FALSE(spec.reward.normalize);

  EXPECT_EQ(error_key([&] { set_env_option(spec, "lr", 1.5); }), "live.extra.lr");
  EXPECT_EQ(error_key([&] { set_env_option(spec, "lr", std::string("abc")); }), "live.extra.lr");
  EXPECT_EQ(error_key([&] { set_env_option(spec, "ranks", 2.0); }), "live.ranks");  // not an int
  EXPECT_EQ(error_key([&] { set_env_option(spec, "ranks", int64_t{0}); }), "live.ranks");
  EXPECT_EQ(error_key([&] { set_env_option(spec, "normalize_reward", int64_t{1}); }),
            "reward.normalize");
  EXPECT_EQ(error_key([&] { set_env_option(spec, "steps_per_episode", int64_t{0}); }),
            "steps_per_episode");
  // The task instance, as with_instance sets it (the config text too).
  set_env_option(spec, "instance", int64_t{5});
  EXPECT_EQ(spec.scenario.instance, 5u);
  EXPECT_EQ(error_key([&] { set_env_option(spec, "instance", int64_t{-1}); }), "instance");
  EXPECT_EQ(spec.live.extra.lr, 1.0) << "a refused value leaves the spec as it was";
  try {
    set_env_option(spec, "lrr", 0.1);
    FAIL() << "an unknown option must throw";
  } catch (const EnvOptionError&) {
    FAIL() << "an unknown name is not a bad value";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no option 'lrr'; allowed: steps_per_episode, initial_plan, "
                        "normalize_reward, instance, lr, ranks"),
              std::string::npos)
        << what;
  }
}

TEST(EnvOptions, ValidateChecksRangesThenTheEnvsOwnRule) {
  ExperimentSpec spec = test_specs::tiny();
  spec.env_id = "test/RegistryFake-v0";
  spec.live.ranks = 4;
  EXPECT_NO_THROW(validate_env_spec(spec));
  spec.live.ranks = 3;
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "live.ranks");  // the env's rule
  spec.live.ranks = 4;
  spec.live.extra.lr = -1;  // set around the option: still caught
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "live.extra.lr");
  spec.env_id = "test/Nope-v0";
  EXPECT_THROW(validate_env_spec(spec), std::invalid_argument);
}

TEST(EnvOptions, OptionsUnderASectionComeFromEveryRegistration) {
  std::vector<std::string> keys;
  for (const EnvOption& o : options_under("live.extra.")) keys.push_back(o.config_key);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "live.extra.lr"), 1) << "listed once";
  for (const std::string& k : keys) EXPECT_EQ(k.rfind("live.extra.", 0), 0u) << k;
  EXPECT_TRUE(options_under("no.such.section.").empty());
}

// ---- The registrations this build links: what each declares.

TEST(BuiltinEnvs, SimulatorIsDeterministicWithOnlyTheCommonOptions) {
  const EnvType& t = env_type("shardgym/TPSim-v0");
  EXPECT_TRUE(t.options.empty());
  EXPECT_TRUE(t.flags.deterministic);
  EXPECT_FALSE(t.flags.platform_dependent || t.flags.needs_libtorch || t.flags.needs_trace ||
               t.flags.real_run);
  ExperimentSpec spec = test_specs::tiny();
  spec.env_id = t.id;
  EXPECT_NO_THROW(validate_env_spec(spec));
}

TEST(BuiltinEnvs, ReplayNeedsAnExistingTrace) {
  const EnvType& t = env_type("shardgym/TPReplay-v0");
  EXPECT_TRUE(t.flags.needs_trace);
  EXPECT_TRUE(t.flags.deterministic);
  EXPECT_FALSE(t.flags.needs_libtorch);
  ASSERT_EQ(t.options.size(), 1u);
  EXPECT_EQ(t.options[0].name, "trace");
  EXPECT_EQ(t.options[0].type, OptionType::kPath);
  EXPECT_EQ(t.options[0].config_key, "replay_trace");
  ExperimentSpec spec = test_specs::tiny();
  spec.env_id = t.id;
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "replay_trace");  // required
  set_env_option(spec, "trace", std::string("/no/such/trace.h5"));
  EXPECT_EQ(spec.replay_trace, "/no/such/trace.h5");
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "replay_trace");  // must exist
  EXPECT_EQ(error_key([&] { set_env_option(spec, "trace", true); }), "replay_trace");
}

TEST(BuiltinEnvs, LiveDeclaresItsExtraOptionsAndChecksTheSpec) {
  if (!env_registered("shardgym/TPLive-v0")) {
    GTEST_SKIP() << "shardgym/TPLive-v0 is registered only with LibTorch";
  }
  const EnvType& t = env_type("shardgym/TPLive-v0");
  EXPECT_FALSE(t.flags.deterministic);
  EXPECT_TRUE(t.flags.platform_dependent && t.flags.needs_libtorch && t.flags.real_run);
  std::vector<std::string> names;
  for (const EnvOption& o : t.options) {
    names.push_back(o.name);
    EXPECT_EQ(o.config_key, "live.extra." + o.name);
    EXPECT_FALSE(o.doc.empty()) << o.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"lr", "weight_decay", "clip", "fault", "worker"}));
  EXPECT_EQ(option_named(t.options, "worker").type, OptionType::kPath);

  ExperimentSpec spec = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/2);
  spec.env_id = t.id;
  spec.live.ranks = spec.cluster.world_size();
  EXPECT_NO_THROW(validate_env_spec(spec));
  EXPECT_EQ(error_key([&] { set_env_option(spec, "lr", -0.1); }), "live.extra.lr");
  set_env_option(spec, "fault", std::string("explode@1:2"));
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "live.extra.fault");
  set_env_option(spec, "fault", std::string("nostart@5"));  // beyond the ranks
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "live.extra.fault");
  set_env_option(spec, "fault", std::string("throw@1:2"));
  EXPECT_NO_THROW(validate_env_spec(spec));
  spec.live.ranks = spec.cluster.world_size() + 1;
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "live.ranks");
  spec.live.ranks = spec.cluster.world_size();
  spec.model.vocab = 100;
  EXPECT_EQ(error_key([&] { validate_env_spec(spec); }), "model.vocab");
}

}  // namespace
}  // namespace shardgym
