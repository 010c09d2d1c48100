// The configs shipped under experiments/, shared by the config and configs-run tests.
// Needs SHARDGYM_TEST_SOURCE_DIR and SHARDGYM_TEST_WITH_TORCH (tests/experiments/CMakeLists.txt).
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "experiments/config.h"

namespace shardgym::testing {

// Every *.yaml under experiments/ except the hardware catalog, calibration files
// (`format: shardgym-calibration`, docs/calibration.md) and task suites (a top-level `tasks:`,
// experiments/suite.h; shipped_suites() lists those), sorted.
inline std::vector<std::string> shipped_configs() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(SHARDGYM_TEST_SOURCE_DIR) + "/experiments")) {
    if (e.path().extension() != ".yaml" || e.path().filename() == "hardware.yaml") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("\nformat: shardgym-calibration\n") != std::string::npos) continue;
    if (text.rfind("tasks:", 0) == 0 || text.find("\ntasks:") != std::string::npos) continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The task suites shipped under experiments/ (a top-level `tasks:`), sorted.
inline std::vector<std::string> shipped_suites() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(SHARDGYM_TEST_SOURCE_DIR) + "/experiments")) {
    if (e.path().extension() != ".yaml") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.rfind("tasks:", 0) == 0 || text.find("\ntasks:") != std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Live-backend configs need the LibTorch build (SHARDGYM_WITH_TORCH=ON, the default); in a
// build without it their env id is not registered and the loader rightly rejects them.
inline bool loadable_in_this_build(const std::string& path, ExperimentSpec* spec) {
  try {
    *spec = load_experiment(path);
    return true;
  } catch (const ConfigError& e) {
    if (!SHARDGYM_TEST_WITH_TORCH && e.key() == "env" &&
        e.reason().find("TPLive") != std::string::npos) {
      std::cout << "not in this build (SHARDGYM_WITH_TORCH=OFF): " << path << "\n";
      return false;
    }
    throw;
  }
}

}  // namespace shardgym::testing
