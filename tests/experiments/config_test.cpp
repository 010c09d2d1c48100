// The config loader: every shipped config loads to the figures it states, and broken configs
// are rejected with the right file, key path, line and reason.
#include "experiments/config.h"
#include "tests/experiments/shipped_configs.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "env/registry.h"

namespace shardgym {
namespace {

namespace fs = std::filesystem;

std::string source_dir() { return SHARDGYM_TEST_SOURCE_DIR; }
std::string data(const std::string& name) {
  return source_dir() + "/tests/experiments/data/" + name;
}
std::string experiments(const std::string& name) { return source_dir() + "/experiments/" + name; }

// The live env registers only in builds with LibTorch; without it the live tests pass, saying so.
bool live_in_this_build() {
  if (env_registered("shardgym/TPLive-v0")) return true;
  std::cout << "shardgym/TPLive-v0 is not in this build (SHARDGYM_WITH_TORCH=OFF)\n";
  return false;
}

// The ConfigError that `load` throws; none, and a failure saying what was `accepted`, when it
// loads.
template <class Load>
std::optional<ConfigError> config_error(const Load& load, const std::string& accepted) {
  try {
    load();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted " << accepted;
  return std::nullopt;
}

// Every experiment config under experiments/ (the hardware catalog is not one).
using testing::loadable_in_this_build;
using testing::shipped_configs;

TEST(ConfigTest, EveryShippedConfigLoads) {
  const auto configs = shipped_configs();
  // quickstart + four scenarios at least; a lower count means the search broke.
  ASSERT_GE(configs.size(), 5u);
  for (const auto& path : configs) {
    SCOPED_TRACE(path);
    ExperimentSpec spec;
    bool loaded = false;
    ASSERT_NO_THROW(loaded = loadable_in_this_build(path, &spec));
    if (!loaded) continue;
    EXPECT_EQ(spec.source_path, path);
    EXPECT_TRUE(spec.cluster.validate().empty());
    EXPECT_TRUE(resolve_plan(spec.initial_plan, spec.model, spec.cluster)
                    .validate(spec.model, spec.cluster.world_size())
                    .empty());
  }
}

TEST(ConfigTest, HardwareCatalogLoadsWithDatasheetFigures) {
  HardwareCatalog c = load_hardware_catalog(experiments("hardware.yaml"));
  ASSERT_GE(c.devices.size(), 3u);
  const auto h100 = std::find_if(c.devices.begin(), c.devices.end(),
                                 [](const DeviceType& d) { return d.name == "H100-SXM5-80GB"; });
  ASSERT_NE(h100, c.devices.end());
  EXPECT_DOUBLE_EQ(h100->peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(h100->memory_bytes, 80.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(h100->memory_bw, 3350e9);
  EXPECT_DOUBLE_EQ(h100->busy_w, 700);
  // The fp32 figure is picked when the model trains in fp32.
  HardwareCatalog fp32 = load_hardware_catalog(experiments("hardware.yaml"), DType::kFloat32);
  EXPECT_DOUBLE_EQ(fp32.devices.front().peak_flops, 67e12);
}

TEST(ConfigTest, QuickstartSaysWhatTheReadmeSays) {
  ExperimentSpec s = load_experiment(experiments("quickstart.yaml"));
  EXPECT_EQ(s.name, "quickstart");
  EXPECT_EQ(s.env_id, "shardgym/TPSim-v0");
  EXPECT_EQ(s.model.layers, 24);
  EXPECT_EQ(s.model.hidden, 2048);
  EXPECT_EQ(s.model.heads, 16);
  EXPECT_EQ(s.model.seq, 2048);
  EXPECT_EQ(s.cluster.world_size(), 16);
  EXPECT_EQ(s.cluster.num_nodes(), 2);
  EXPECT_EQ(s.episodes, 3);
  EXPECT_EQ(s.steps_per_episode, 50);
  // Only the device and the two links the cluster uses are kept from the catalog.
  ASSERT_EQ(s.cluster.devices.size(), 1u);
  ASSERT_EQ(s.cluster.links.size(), 2u);
  EXPECT_EQ(s.cluster.inter_link, "ib-hdr200");
  EXPECT_DOUBLE_EQ(s.cluster.links[s.cluster.link_index("nvswitch-h100")].bandwidth, 450e9);
  // The nccl-tests per-step latency of the catalog (hardware.yaml), not the datasheet's.
  EXPECT_DOUBLE_EQ(s.cluster.links[s.cluster.link_index("nvswitch-h100")].latency_s, 5.7e-6);
  EXPECT_DOUBLE_EQ(s.cluster.device_of(0).gemm_efficiency, 0.61);
  EXPECT_DOUBLE_EQ(s.cluster.device_of(0).gemm_fixed_s, 7e-6);  // the H200 sweep's (GH100)
  // The stored text carries the included catalog, commented out.
  EXPECT_NE(s.source_text.find("# ---- included hardware.yaml ----"), std::string::npos);
}

TEST(ConfigTest, HeteroDynamicHasItsThreeEvents) {
  ExperimentSpec s = load_experiment(experiments("scenarios/hetero-dynamic.yaml"));
  ASSERT_EQ(s.cluster.devices.size(), 2u);
  EXPECT_NE(s.cluster.device_of(0).name, s.cluster.device_of(15).name);
  ASSERT_EQ(s.scenario.events.size(), 3u);
  const ScenarioEvent& seq = s.scenario.events[0];
  EXPECT_EQ(seq.step, 10);
  EXPECT_EQ(seq.kind, EventKind::kSeqLength);
  EXPECT_EQ(seq.value, 256);
  const ScenarioEvent& bw = s.scenario.events[1];
  EXPECT_EQ(bw.step, 50);
  EXPECT_EQ(bw.kind, EventKind::kLinkBandwidth);
  EXPECT_EQ(bw.target, s.cluster.inter_link);
  EXPECT_DOUBLE_EQ(bw.factor, 0.25);
  const ScenarioEvent& straggler = s.scenario.events[2];
  EXPECT_EQ(straggler.step, 75);
  EXPECT_EQ(straggler.kind, EventKind::kStraggler);
  EXPECT_EQ(straggler.rank, 12);
  EXPECT_DOUBLE_EQ(straggler.factor, 1.5);
  EXPECT_EQ(s.scenario.num_phases(), 4);
}

TEST(ConfigTest, MinimalConfigTakesDefaults) {
  ExperimentSpec s = load_experiment(data("minimal.yaml"));
  EXPECT_EQ(s.name, "minimal");
  EXPECT_EQ(s.env_id, "shardgym/TPSim-v0");
  EXPECT_EQ(s.agent.id, "random");
  EXPECT_EQ(s.initial_plan, "megatron");
  EXPECT_EQ(s.seeds, std::vector<uint64_t>{0});
  EXPECT_EQ(s.cluster.world_size(), 8);
  EXPECT_TRUE(s.cluster.inter_link.empty());
  EXPECT_DOUBLE_EQ(s.cluster.links[0].energy_per_byte, 0);
}

// The error parse_experiment throws for the config at `path` with `from` replaced by `to`
// ("" if it parses); the text is parsed as if it were a file next to `path`.
std::string edit_error(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string t = text.str();
  const size_t at = t.find(from);
  if (at == std::string::npos) return "test bug: '" + from + "' not in " + path;
  t.replace(at, from.size(), to);
  try {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    parse_experiment(t, (dir / "inline.yaml").string(), dir.string());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// edit_error of tests/experiments/data/minimal.yaml.
std::string minimal_error(const std::string& from, const std::string& to) {
  return edit_error(data("minimal.yaml"), from, to);
}

// Sizes whose products overflow (4·hidden is an int) are refused with file, line and reason,
// instead of figures computed from a wrapped-around value.
TEST(ConfigTest, AbsurdModelSizesAreRefused) {
  const std::string hidden = minimal_error("hidden: 1024", "hidden: 536870912");
  EXPECT_NE(hidden.find("inline.yaml:2:"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("hidden 536870912 is above the limit 1048576"), std::string::npos) << hidden;
  EXPECT_NE(minimal_error("seq: 512", "seq: 1000000000").find("seq 1000000000 is above"),
            std::string::npos);
  EXPECT_NE(minimal_error("layers: 2", "layers: 100000").find("100000"), std::string::npos);
  EXPECT_EQ(minimal_error("hidden: 1024", "hidden: 1048576"), "");  // the limit itself is allowed
}

// Llama's blocks are written as `arch: llama` plus kv_heads and ffn (docs/configs.md "Model
// shapes"); each trait can be set apart, and kv_heads must divide heads.
TEST(ConfigTest, LlamaShapesAreWrittenAsTheFamilyAndTheirOwnKeys) {
  const ExperimentSpec s = load_experiment(experiments("llama3-8b.yaml"));
  EXPECT_TRUE(s.model.rmsnorm && s.model.swiglu && s.model.rotary);
  EXPECT_FALSE(s.model.linear_bias || s.model.dropout || s.model.tied_embeddings);
  EXPECT_EQ(s.model.kv_heads, 8);
  EXPECT_EQ(s.model.qkv_width(), 4096 + 2 * 8 * 128);
  const std::string kv = minimal_error("heads: 16", "heads: 16, kv_heads: 5");
  EXPECT_NE(kv.find("model.kv_heads"), std::string::npos) << kv;
  EXPECT_NE(kv.find("5 key/value heads do not divide 16 heads"), std::string::npos) << kv;
  EXPECT_NE(minimal_error("heads: 16", "heads: 16, kv_heads: 32").find("model.kv_heads"),
            std::string::npos);
  EXPECT_NE(minimal_error("heads: 16", "heads: 16, arch: mamba").find("model.arch"),
            std::string::npos);
  EXPECT_EQ(minimal_error("heads: 16", "heads: 16, arch: llama, bias: true, norm: layernorm"), "");
}

// A catalog board without a peak for the model's dtype (the V100 has no bf16) does not stop
// configs that do not use it; a cluster that uses it is refused, naming the node's line, the
// board and the dtype.
TEST(ConfigTest, BoardWithoutTheModelsDtypeIsRefusedOnlyWhereUsed) {
  const std::string path = experiments("quickstart.yaml");
  const std::string v100 = edit_error(path, "device: H100-SXM5-80GB", "device: V100-SXM2-32GB");
  EXPECT_NE(v100.find("inline.yaml:23:"), std::string::npos) << v100;
  EXPECT_NE(v100.find("device 'V100-SXM2-32GB' cannot run this model"), std::string::npos) << v100;
  EXPECT_NE(v100.find("no figure for the model's dtype 'bf16' (given: fp16, fp32, fp64)"),
            std::string::npos)
      << v100;
  EXPECT_EQ(edit_error(path, "device: H100-SXM5-80GB", "device: H200-SXM-141GB"), "");
}

// Agent parameters are checked at load, with file, line and reason (issue: ppo(ent=abc) and
// ppo(bogus=1) failed only at the first episode, and `cost` accepted them). PPO's parameters
// are checked in builds without LibTorch too.
TEST(ConfigTest, AgentParametersAreCheckedAtLoad) {
  auto error_for = [](const std::string& to) {
    return edit_error(experiments("quickstart.yaml"), "id: ppo(ent=0.03,polish=4)", "id: " + to);
  };
  const std::string ent = error_for("ppo(ent=abc)");
  EXPECT_NE(ent.find("experiments/inline.yaml:39:"), std::string::npos) << ent;
  EXPECT_NE(ent.find("ppo: parameter ent='abc' is not a number"), std::string::npos) << ent;
  EXPECT_NE(error_for("ppo(bogus=1)").find("unknown parameter 'bogus'"), std::string::npos);
  EXPECT_NE(error_for("ppo(gamma=2)").find("gamma and lambda must lie in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_for("greedy(scope=all)").find("scope must be block or kind"), std::string::npos);
  EXPECT_NE(error_for("anneal(decay=1.5)").find("0 < decay < 1"), std::string::npos);
  EXPECT_NE(error_for("random-search(budget=0.5)").find("budget must be a whole number"),
            std::string::npos);
  EXPECT_NE(error_for("megatron(plan=dp)").find("unknown parameter 'plan'"), std::string::npos);
  EXPECT_NE(error_for("oracle(x=1)").find("unknown parameter 'x'"), std::string::npos);
  EXPECT_EQ(error_for("static(plan=dp)"), "");
  const std::string reward = "reward: {latency: 1.0, memory: 0.0, energy: 0.0, normalize: true}";
  auto reward_error = [&](const std::string& to) {
    return edit_error(experiments("quickstart.yaml"), reward, to);
  };
  EXPECT_EQ(reward_error("reward: {latency: 1.0, latency_as: time_saved}"), "");
  EXPECT_NE(reward_error("reward: {latency: 1.0, latency_as: seconds}")
                .find("must be speedup or time_saved, not 'seconds'"),
            std::string::npos);
  EXPECT_NE(reward_error("reward: {latency: 1.0, normalize: false, latency_as: time_saved}")
                .find("needs normalize: true"),
            std::string::npos);
  EXPECT_EQ(error_for("anneal(decay=0.9,scope=kind)"), "");
}

// A catalog in which no entry is valid for some block kind is refused at load (issue: it was
// accepted and every action was masked at step 0).
TEST(ConfigTest, CatalogWithEveryEntryMaskedIsRefused) {
  const std::string e =
      edit_error(data("minimal.yaml"), "cluster:", "catalog: {chunks: [64]}\ncluster:");
  EXPECT_NE(e.find("inline.yaml:3: catalog: no catalog entry is valid for the attention blocks"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("chunks=64 does not divide the local batch"), std::string::npos) << e;
  EXPECT_EQ(edit_error(data("minimal.yaml"), "cluster:", "catalog: {chunks: [1, 64]}\ncluster:"),
            "");
}

// Seen while writing fuzz/config_fuzz, reproduced by it (UBSan): many large `nodes:` entries
// overflowed the int of world_size(). The totals are now bounded (ClusterSpec::kMaxNodes,
// kMaxGpus) at the entry that crosses them.
TEST(ConfigTest, ClusterTotalsAreBounded) {
  std::string many;
  for (int i = 0; i < 130; ++i)
    many += "    - {device: gpu, gpus: 4096, intra_link: fast, count: 4096}\n";
  const std::string what = edit_error(data("minimal.yaml"),
                                      "    - {device: gpu, gpus: 8, intra_link: fast}\n",
                                      many + "  inter_link: fast\n");
  EXPECT_NE(what.find("cluster.nodes[1].count: the cluster would have 8192 nodes"),
            std::string::npos) << what;
  const std::string largest = edit_error(
      data("minimal.yaml"), "    - {device: gpu, gpus: 8, intra_link: fast}\n",
      "    - {device: gpu, gpus: 4096, intra_link: fast, count: 4096}\n  inter_link: fast\n");
  EXPECT_EQ(largest.find("nodes and"), std::string::npos) << largest;
}

// The error of a config that includes a file holding `contents` (written to a temporary
// file `name`, removed after), and that file's path.
std::pair<std::string, std::string> include_error(const std::string& name,
                                                  const std::string& contents) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  {
    std::ofstream out(path);
    out << contents;
  }
  std::string what;
  try {
    parse_experiment("include: " + path + "\nmodel: {layers: 2, hidden: 1024, heads: 16, seq: 512}\n",
                     "inline.yaml");
  } catch (const std::exception& e) {
    what = e.what();
  }
  std::filesystem::remove(path);
  return {what, path};
}

// An included file that is not YAML is named, not echoed (`include: /etc/passwd`).
TEST(ConfigTest, IncludedTextIsNotEchoed) {
  const auto [what, secret] = include_error(
      "shardgym_secret.txt", "root:x:0:0:secret-token-123:/root:/bin/bash\nsecond line of the secret\n");
  ASSERT_FALSE(what.empty());
  EXPECT_NE(what.find(secret), std::string::npos) << what;
  EXPECT_NE(what.find("plain text of"), std::string::npos) << what;
  EXPECT_EQ(what.find("secret-token"), std::string::npos) << what;
  EXPECT_EQ(what.find("root:x"), std::string::npos) << what;
}

// An included file whose first line is `key: value` (a YAML mapping) is refused without
// quoting its keys or values: the "unknown key" error used to name the key and its line.
TEST(ConfigTest, IncludedMappingIsNotEchoed) {
  const auto [what, secret] = include_error(
      "shardgym_secret_map.txt", "secretuser: hunter2-token\notherkey: {nested: value-xyz}\n");
  ASSERT_FALSE(what.empty());
  EXPECT_NE(what.find(secret), std::string::npos) << what;
  EXPECT_NE(what.find("not a hardware file"), std::string::npos) << what;
  for (const char* leak : {"secretuser", "hunter2", "otherkey", "value-xyz"})
    EXPECT_EQ(what.find(leak), std::string::npos) << leak << " in: " << what;
}

// A config with a live section runs the live ranks' layers, so its simulator prices their
// memory (model.live_layers); a simulator config of them says so (`implementation: live`),
// and a live config that says otherwise is refused at the key.
TEST(ConfigTest, ALiveSectionPricesTheLiveLayers) {
  EXPECT_FALSE(load_experiment(experiments("quickstart.yaml")).model.live_layers);
  EXPECT_TRUE(load_experiment(experiments("fidelity/sim-threads-4.yaml")).model.live_layers);
  const std::vector<std::string> ids = registered_env_ids();
  if (std::find(ids.begin(), ids.end(), "shardgym/TPLive-v0") == ids.end())
    GTEST_SKIP() << "shardgym/TPLive-v0 is not in this build (LibTorch off)";
  EXPECT_TRUE(load_experiment(experiments("live-quickstart.yaml")).model.live_layers);
  const std::string e = edit_error(experiments("live-quickstart.yaml"), "  mixed_precision: false",
                                   "  implementation: megatron\n  mixed_precision: false");
  EXPECT_NE(e.find("implementation: live"), std::string::npos) << e;
  EXPECT_NE(e.find("model.implementation"), std::string::npos) << e;
}

// live.corpus is read at load: a corpus too short for one window of the model's sequence, or
// a FIFO, is a ConfigError at the key (a rank used to find out when it started).
TEST(ConfigTest, LiveCorpusIsCheckedAtLoad) {
  const std::vector<std::string> ids = registered_env_ids();
  if (std::find(ids.begin(), ids.end(), "shardgym/TPLive-v0") == ids.end())
    GTEST_SKIP() << "shardgym/TPLive-v0 is not in this build (LibTorch off)";
  std::ifstream in(source_dir() + "/experiments/live-quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string tiny = (std::filesystem::temp_directory_path() / "shardgym_tiny_corpus.txt").string();
  { std::ofstream(tiny) << "too short\n"; }
  std::string base = text.str();
  const size_t at = base.find("  launch: threads\n");
  ASSERT_NE(at, std::string::npos);
  for (const std::string& corpus : {tiny, std::string("/dev/zero")}) {
    std::string config = base;
    config.insert(at, "  corpus: " + corpus + "\n");
    try {
      parse_experiment(config, source_dir() + "/experiments/live-quickstart.yaml",
                       source_dir() + "/experiments");
      ADD_FAILURE() << "accepted corpus " << corpus;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "live.corpus") << e.what();
      EXPECT_NE(std::string(e.what()).find(corpus), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(tiny);
}

// Devices, pipes and names that leave runs/ are refused before anything is read or written.
TEST(ConfigTest, UnboundedInputsAndEscapingNamesAreRefused) {
  auto error_of = [](const std::string& text) {
    try {
      parse_experiment(text, "inline.yaml");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string model = "model: {layers: 2, hidden: 1024, heads: 16, seq: 512}\n";
  EXPECT_NE(error_of("include: /dev/zero\n" + model).find("'/dev/zero' is not a regular file"),
            std::string::npos);
  for (const char* name : {"../x", "/abs/path", "a/b", ".."}) {
    const std::string what = error_of(std::string("name: '") + name + "'\n" + model);
    EXPECT_NE(what.find("is not a plain run name"), std::string::npos) << name << ": " << what;
  }
  try {
    load_experiment("/dev/zero");
    ADD_FAILURE() << "/dev/zero loaded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

// live.extra takes only the keys the live runtime reads, with numbers checked at load, and
// live.timeout_s stays in Gloo's range (1e300 overflowed into "Invalid timeout").
TEST(ConfigTest, LiveExtraAndTimeoutAreChecked) {
#if !SHARDGYM_TEST_WITH_TORCH
  GTEST_SKIP() << "shardgym/TPLive-v0 is registered only with LibTorch";
#endif
  auto error_for = [](const std::string& from, const std::string& to) {
    return edit_error(experiments("live-quickstart.yaml"), from, to);
  };
  EXPECT_NE(error_for("    clip: \"1.0\"", "    clip: \"1.0\"\n    bogus: \"1\"")
                .find("live.extra.bogus: unknown key"),
            std::string::npos);
  EXPECT_NE(error_for("    lr: \"3e-3\"", "    lr: \"abc\"").find("live.extra.lr: expected a number"),
            std::string::npos);
  EXPECT_NE(error_for("  timeout_s: 60", "  timeout_s: 1e300").find("live.timeout_s: must be between"),
            std::string::npos);
  EXPECT_EQ(error_for("  timeout_s: 60", "  timeout_s: 30"), "");
}

// The ConfigError of live-quickstart.yaml with `from` replaced by `to` (key "" if it loads).
ConfigError live_edit_error(const std::string& from, const std::string& to) {
  const std::string path = experiments("live-quickstart.yaml");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string t = text.str();
  const size_t at = t.find(from);
  if (at == std::string::npos) return ConfigError("", "", 0, "test bug: no '" + from + "'");
  t.replace(at, from.size(), to);
  try {
    parse_experiment(t, "live.yaml", fs::path(path).parent_path().string());
  } catch (const ConfigError& e) {
    return e;
  }
  return ConfigError("", "", 0, "loaded");
}

// live.extra holds the options the live env's registration declares: typed at load, unknown
// keys refused with their line and the known ones, the registration's checks at the option's
// line, and the runtime gets typed values.
TEST(ConfigTest, LiveExtraOptionsAreTypedByTheRegistration) {
  if (!env_registered("shardgym/TPLive-v0")) {
    GTEST_SKIP() << "shardgym/TPLive-v0 is registered only with LibTorch";
  }
  const ExperimentSpec spec = load_experiment(experiments("live-quickstart.yaml"));
  EXPECT_DOUBLE_EQ(spec.live.extra.lr, 3e-3);  // quoted in the file: still a number
  EXPECT_DOUBLE_EQ(spec.live.extra.clip, 1.0);
  EXPECT_EQ(spec.live.extra.fault, "");

  // live-quickstart.yaml: `extra:` is line 58, lr 59, weight_decay 60, clip 61. A fault the
  // runtime could not inject is found by the registration's validate, at its line; a path
  // option is relative to the config's folder, and it must exist.
  const std::string clip = "    clip: \"1.0\"\n";
  struct Refused {
    std::string from, to, key;
    int line;
    const char* reason;
  };
  for (const Refused& r : std::vector<Refused>{
           {clip, clip + "    lrr: 1\n", "live.extra.lrr", 62, "did you mean 'lr'"},
           {clip, clip + "    lrr: 1\n", "live.extra.lrr", 62,
            "known keys: lr, weight_decay, clip, fault, worker"},
           {"    weight_decay: \"0.1\"", "    weight_decay: [0.1]", "live.extra.weight_decay", 60,
            "expected a number"},
           {"    clip: \"1.0\"", "    clip: -2", "live.extra.clip", 61, "must be between 0 and"},
           {clip, clip + "    fault: exit@1:2\n", "live.extra.fault", 62,
            "needs launch = processes"},
           {clip, clip + "    worker: no_such_worker\n", "live.extra.worker", 62, "no file at"}}) {
    const ConfigError e = live_edit_error(r.from, r.to);
    EXPECT_EQ(e.key(), r.key) << e.what();
    EXPECT_EQ(e.line(), r.line) << e.what();
    EXPECT_NE(e.reason().find(r.reason), std::string::npos) << e.what();
  }
  EXPECT_EQ(live_edit_error(clip, clip + "    worker: hardware.yaml\n").reason(), "loaded");
}

// docs/configs.md's table of live options is the registration's: every declared option is a
// row with its type, and the table has no other row.
TEST(ConfigTest, LiveOptionsTableInTheDocsIsTheRegistrations) {
  if (!env_registered("shardgym/TPLive-v0")) {
    GTEST_SKIP() << "shardgym/TPLive-v0 is registered only with LibTorch";
  }
  std::ifstream in(source_dir() + "/docs/configs.md");
  std::stringstream docs;
  docs << in.rdbuf();
  const std::string text = docs.str();
  size_t rows = 0;
  for (size_t at = text.find("| `live.extra."); at != std::string::npos;
       at = text.find("| `live.extra.", at + 1))
    ++rows;
  const std::vector<EnvOption> options = env_type("shardgym/TPLive-v0").options;
  EXPECT_EQ(rows, options.size());
  for (const EnvOption& o : options) {
    const std::string row = "| `" + o.config_key + "` | " + option_type_name(o.type) + " | ";
    EXPECT_NE(text.find(row), std::string::npos) << "docs/configs.md lacks the row " << row;
  }
}

// A live world this process cannot hold is refused at load, naming live.ranks, the limit and
// its value (16 ranks under `ulimit -n 100` used to fail minutes later blaming name
// resolution). Here the soft descriptor limit is lowered for the parse and restored.
TEST(ConfigTest, LiveWorldsBeyondTheDescriptorLimitAreRefusedAtLoad) {
  if (!live_in_this_build()) return;
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 80;  // the 4 quickstart rank threads need about 96 (world_limits.h)
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string error;
  try {
    load_experiment(experiments("live-quickstart.yaml"));
  } catch (const ConfigError& e) {
    error = e.what();
    EXPECT_EQ(e.key(), "live.ranks");
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_NE(error.find("live.ranks: 4 rank threads need about"), std::string::npos) << error;
  EXPECT_NE(error.find("file descriptors in this process; it may open 80 (ulimit -n)"),
            std::string::npos)
      << error;
  EXPECT_NO_THROW(load_experiment(experiments("live-quickstart.yaml")));
}

TEST(ConfigTest, EventsAreSortedByStep) {
  std::ifstream in(data("minimal.yaml"));
  std::stringstream text;
  text << in.rdbuf()
       << "scenario:\n  events:\n"
          "    - {step: 40, kind: seq_length, value: 1024}\n"
          "    - {step: 10, kind: batch, value: 32}\n";
  ExperimentSpec s = parse_experiment(text.str(), "inline.yaml");
  ASSERT_EQ(s.scenario.events.size(), 2u);
  EXPECT_EQ(s.scenario.events[0].kind, EventKind::kBatch);
  EXPECT_EQ(s.scenario.events[0].value, 32);
  EXPECT_EQ(s.scenario.events[1].kind, EventKind::kSeqLength);
}

struct BadCase {
  const char* file;        // under tests/experiments/data/
  const char* error_file;  // file the error must name (an included catalog for some)
  const char* key;
  int line;
  const char* reason;  // substring of the reason
};

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

// data/`c.file` is refused naming its file, key path, line and reason.
void expect_rejected(const BadCase& c) {
  const auto e = config_error([&] { load_experiment(data(c.file)); }, c.file);
  ASSERT_TRUE(e);
  EXPECT_EQ(fs::path(e->file()).filename().string(), c.error_file) << e->what();
  EXPECT_EQ(e->key(), c.key) << e->what();
  EXPECT_EQ(e->line(), c.line) << e->what();
  EXPECT_NE(e->reason().find(c.reason), std::string::npos) << e->what();
  // what() is "<file>:<line>: <key>: <reason>".
  const std::string expected_prefix = e->file() + ":" + std::to_string(c.line) + ": ";
  EXPECT_EQ(std::string(e->what()).rfind(expected_prefix, 0), 0u) << e->what();
}

TEST_P(BadConfigTest, RejectedWithFileKeyLineAndReason) { expect_rejected(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Data, BadConfigTest,
    ::testing::Values(
        BadCase{"unknown_key.yaml", "unknown_key.yaml", "model.hiden", 3, "did you mean 'hidden'"},
        BadCase{"wrong_type.yaml", "wrong_type.yaml", "cluster.nodes[1].gpus", 13,
                "expected an integer, found 'eight'"},
        BadCase{"missing_key.yaml", "missing_key.yaml", "model.heads", 2, "missing required key"},
        BadCase{"heads_not_divided.yaml", "heads_not_divided.yaml", "initial_plan", 10,
                "does not divide heads"},
        BadCase{"world_size_mismatch.yaml", "world_size_mismatch.yaml", "cluster.world_size", 11,
                "hold 16 GPUs"},
        BadCase{"plan_wrong_blocks.yaml", "plan_wrong_blocks.yaml", "initial_plan", 10,
                "has 3 blocks"},
        BadCase{"unknown_device.yaml", "unknown_device.yaml", "cluster.nodes[0].device", 5,
                "did you mean 'H100-SXM5-80GB'"},
        BadCase{"unknown_link.yaml", "unknown_link.yaml", "cluster.inter_link", 6,
                "did you mean 'ib-hdr200'"},
        BadCase{"unknown_agent.yaml", "unknown_agent.yaml", "agent.id", 10,
                "did you mean 'random'"},
        BadCase{"unknown_env.yaml", "unknown_env.yaml", "env", 1, "unknown env"},
        BadCase{"published_table_outside.yaml", "published_table_outside.yaml",
                "published.table", 11, "in the config's own folder"},
        BadCase{"syntax_error.yaml", "syntax_error.yaml", "", 4, "YAML syntax"},
        BadCase{"bad_event.yaml", "bad_event.yaml", "scenario.events[1].rank", 12,
                "between 0 and 7"},
        BadCase{"event_unknown_link.yaml", "event_unknown_link.yaml", "scenario.events[0].link", 11,
                "not a known link of this cluster"},
        BadCase{"duplicate_key.yaml", "duplicate_key.yaml", "episodes", 10, "appears twice"},
        BadCase{"missing_inter_link.yaml", "missing_inter_link.yaml", "cluster.inter_link", 3,
                "2 nodes"},
        BadCase{"include_bad_catalog.yaml", "bad_catalog.yaml", "devices[0].memory_gib", 3,
                "expected a number"},
        BadCase{"include_missing.yaml", "include_missing.yaml", "include", 1, "cannot read"},
        BadCase{"host_kernel_absurd.yaml", "host_kernel_absurd.yaml",
                "cluster.devices[0].host_kernel_us", 6, "must be between 0 and 1e+06"},
        BadCase{"gemm_fixed_absurd.yaml", "gemm_fixed_absurd.yaml",
                "cluster.devices[0].gemm_fixed_us", 6, "must be between 0 and 1000"},
        BadCase{"host_overlap_below_one.yaml", "host_overlap_below_one.yaml",
                "cluster.devices[0].host_overlap_exponent", 7, "must be between 1 and 64"},
        // Reported where a node uses the board (a catalog may hold boards this model
        // cannot run on); the message names the peak_tflops line.
        BadCase{"missing_dtype_flops.yaml", "missing_dtype_flops.yaml",
                "cluster.nodes[0].device", 13,
                "missing_dtype_flops.yaml:5: peak_tflops has no figure for the model's dtype "
                "'fp64'"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = fs::path(info.param.file).stem().string();
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(ConfigTest, ReplayNeedsAnExistingTrace) {
  std::ifstream in(data("minimal.yaml"));
  std::stringstream minimal;
  minimal << in.rdbuf();
  const std::string replay = "env: shardgym/TPReplay-v0\n" + minimal.str();
  // The error of the replay config with `trace_line` appended, read in tests/experiments/data.
  auto error_with = [&](const std::string& trace_line, const std::string& accepted) {
    return config_error([&] { parse_experiment(replay + trace_line, "replay.yaml", data("")); },
                        accepted);
  };
  const auto none = config_error([&] { parse_experiment(replay, "replay.yaml"); },
                                 "a replay config without a trace");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->key(), "replay_trace") << none->what();
  const auto missing = error_with("replay_trace: no_such_trace.h5\n", "a missing trace file");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->key(), "replay_trace") << missing->what();
  EXPECT_EQ(missing->line(), 11) << missing->what();  // 1 line of env + 9 of minimal.yaml + 1
  EXPECT_NE(missing->reason().find("no trace file"), std::string::npos) << missing->what();
  // A name the OS refuses (ENAMETOOLONG) is a ConfigError too; it was a filesystem_error
  // (found by fuzz/config_fuzz).
  const auto long_name = error_with("replay_trace: " + std::string(300, 'x') + "\n",
                                    "a trace name of 300 characters");
  ASSERT_TRUE(long_name);
  EXPECT_EQ(long_name->key(), "replay_trace") << long_name->what();
  EXPECT_NE(long_name->reason().find("no trace file"), std::string::npos) << long_name->what();
  // An existing file that is not a trace is refused at load, relative to the config's
  // directory, naming the file (it used to be accepted and fail when the env was made).
  const auto yaml = error_with("replay_trace: minimal.yaml\n", "a YAML file as a trace");
  ASSERT_TRUE(yaml);
  EXPECT_EQ(yaml->key(), "replay_trace") << yaml->what();
  EXPECT_NE(yaml->reason().find("minimal.yaml"), std::string::npos) << yaml->what();
  EXPECT_NE(yaml->reason().find("cannot be played back"), std::string::npos) << yaml->what();
}

TEST(ConfigTest, LiveConfigNeedsOneRankPerDevice) {
  if (!live_in_this_build()) return;
  expect_rejected({"live_ranks_mismatch.yaml", "live_ranks_mismatch.yaml", "live.ranks", 12,
                   "one rank per device"});
}

// A live run emulates straggler events only (a rank's compute stretched); a link event would
// silently not happen, so it is refused at its key (line 12: the first event).
TEST(ConfigTest, LiveConfigRejectsScenarioEventsItCannotEmulate) {
  if (!live_in_this_build()) return;
  expect_rejected({"live_with_events.yaml", "live_with_events.yaml", "scenario.events", 12,
                   "emulates straggler events only"});
}

TEST(ConfigTest, MissingFileIsAConfigError) {
  try {
    load_experiment(data("does_not_exist.yaml"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(e.reason().find("cannot read"), std::string::npos);
    EXPECT_EQ(e.line(), 0);
  }
}

TEST(ConfigTest, EmptyTextIsRejected) {
  EXPECT_THROW(parse_experiment("", "empty.yaml"), ConfigError);
  EXPECT_THROW(parse_experiment("- a\n- b\n", "list.yaml"), ConfigError);
}

TEST(ConfigTest, ClosestNameSuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> known = {"layers", "hidden", "heads", "seq"};
  EXPECT_EQ(closest_name("hiden", known), "hidden");
  EXPECT_EQ(closest_name("haeds", known), "heads");  // a swap counts as one edit
  EXPECT_EQ(closest_name("Layers", known), "layers");
  EXPECT_EQ(closest_name("completely_different", known), "");
  EXPECT_EQ(closest_name("x", {}), "");
}

// A config as a trace records it carries its included hardware files as comments; rebuilt
// from that text alone it is the same cluster, and an include the text does not carry is
// refused instead of read from disk (a trace reads nothing outside itself).
TEST(ConfigTest, ARecordedConfigIsRebuiltFromItsOwnTextOnly) {
  const ExperimentSpec spec = load_experiment(source_dir() + "/experiments/quickstart.yaml");
  ASSERT_NE(spec.source_text.find("# ---- included hardware.yaml ----"), std::string::npos);
  const ExperimentSpec again = parse_recorded_experiment(spec.source_text, "t", "/nonexistent");
  EXPECT_EQ(again.cluster.world_size(), spec.cluster.world_size());
  ASSERT_EQ(again.cluster.devices.size(), spec.cluster.devices.size());
  for (size_t d = 0; d < spec.cluster.devices.size(); ++d) {
    EXPECT_EQ(again.cluster.devices[d].name, spec.cluster.devices[d].name);
    EXPECT_EQ(again.cluster.devices[d].peak_flops, spec.cluster.devices[d].peak_flops);
  }
  // The same text without its copies: the include is not read from anywhere.
  const std::string bare = spec.source_text.substr(0, spec.source_text.find("\n# ---- included"));
  try {
    parse_recorded_experiment(bare, "t", source_dir() + "/experiments");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'hardware.yaml' is not recorded in the config's text"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardgym
