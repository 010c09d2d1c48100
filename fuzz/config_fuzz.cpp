// parse_experiment on arbitrary YAML text. The only documented error is ConfigError
// (config.h: also for unreadable includes and YAML syntax errors); any other exception escapes
// and libFuzzer reports it as a finding.
//
// `include:` must not read host files: the config is parsed against a fresh temporary tree
//   T/hardware.yaml   T/experiments/hardware.yaml   (copies of experiments/hardware.yaml)
// with base_dir T/experiments (so both the `hardware.yaml` of experiments/*.yaml and the
// `../hardware.yaml` of experiments/scenarios/*.yaml resolve), and an input whose include
// paths resolve outside T (absolute paths, `../../x`) is rejected before the loader sees it.
// The harness reads `include:` with the same yaml-cpp on the same text as the loader, and the
// loader joins and normalises paths lexically as done here; T holds no symlinks.
// (`replay_trace:` is only stat()ed by the loader, never read.) An accepted config's scenario
// draws are drawn for three instances. Each input is also parsed as a
// recorded config (parse_recorded_experiment), which reads its includes from its own text.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <yaml-cpp/yaml.h>

#include "experiments/config.h"

namespace fs = std::filesystem;

namespace {

fs::path g_root;      // T
std::string g_base;   // T/experiments

void remove_root() {
  std::error_code ec;
  fs::remove_all(g_root, ec);
}

bool inside_root(const std::string& name) {
  if (name.find('\0') != std::string::npos) return false;
  const std::string path = (fs::path(g_base) / name).lexically_normal().string();
  const std::string root = g_root.string() + "/";
  return path.compare(0, root.size(), root) == 0;
}

// False when some `include:` entry of the top-level mapping could leave T.
bool includes_confined(const std::string& text) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return true;  // the loader fails on the same syntax error before any include
  }
  if (!doc.IsMap()) return true;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar() != "include") continue;
    const YAML::Node value = it->second;
    if (value.IsScalar() && !inside_root(value.Scalar())) return false;
    if (value.IsSequence()) {
      for (const YAML::Node& entry : value)
        if (entry.IsScalar() && !inside_root(entry.Scalar())) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string tmpl = (fs::temp_directory_path() / "shardgym-config-fuzz-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    std::abort();
  }
  g_root = fs::path(tmpl);
  g_base = (g_root / "experiments").string();
  fs::create_directories(g_base);
  const fs::path catalog = fs::path(SHARDGYM_FUZZ_SOURCE_DIR) / "experiments" / "hardware.yaml";
  std::error_code ec;
  fs::copy_file(catalog, g_root / "hardware.yaml", ec);
  fs::copy_file(catalog, fs::path(g_base) / "hardware.yaml", ec);
  std::atexit(remove_root);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!includes_confined(text)) return -1;  // not run, not kept in the corpus
  try {
    // An accepted config's draws make its instances' events: bounded by what the file
    // implies (at most 100,000 events), and never an exception (scenario_draw.h).
    const shardgym::ExperimentSpec spec = shardgym::parse_experiment(text, "fuzz.yaml", g_base);
    for (uint64_t instance : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}})
      (void)shardgym::with_instance(spec, instance).scenario.drawn();
  } catch (const shardgym::ConfigError&) {
  }
  // The same text as a trace's recorded config: its includes come from the commented copies
  // it carries ("# ---- included NAME ----"), never from disk; the same one error type.
  try {
    (void)shardgym::parse_recorded_experiment(text, "recorded.yaml", g_base);
  } catch (const shardgym::ConfigError&) {
  }
  return 0;
}
