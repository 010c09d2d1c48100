// parse_calibration_file on arbitrary text (experiments/calibration_file.h: a calibration file
// is untrusted input, docs/calibration.md). The only documented error is ConfigError naming
// the file; any other exception escapes and libFuzzer reports it. Every file that is read:
// - writes back to a text that reads back to the same text (the writer's 17 digits);
// - holds at most the reader's row limits, every pipelined plan's text ending in a pipeline;
// - applied to the cluster of experiments/fidelity/sim-threads-4.yaml (the world it was not
//   measured on is refused with a reason, not an exception), prices a plain plan and a
//   pipelined one on the simulator without crashing; a cluster the fitted figures make
//   invalid is refused with std::invalid_argument, as SimRun documents.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "fuzz/fuzz_check.h"

#include "experiments/calibration_file.h"
#include "experiments/config.h"
#include "runtime/core/measurement.h"
#include "runtime/core/plan.h"
#include "runtime/sim/sim_run.h"

namespace {

// The simulator config of 4 rank threads without its calibration, with an agent the fuzz
// build has (no LibTorch there: no PPO).
const shardgym::ExperimentSpec& base_spec() {
  static const shardgym::ExperimentSpec spec = [] {
    const std::string dir = std::string(SHARDGYM_FUZZ_SOURCE_DIR) + "/experiments/fidelity";
    std::ifstream in(dir + "/sim-threads-4.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"ppo(ent=0.03)", "greedy"},
                                   {"calibration: calib-threads-4.yaml", ""}}) {
      const size_t at = text.find(from);
      if (at == std::string::npos) std::abort();  // the shipped config changed: update here
      text.replace(at, from.size(), to);
    }
    return shardgym::parse_experiment(text, "sim-threads-4.yaml", dir);
  }();
  return spec;
}

void price(const shardgym::ExperimentSpec& spec) {
  std::unique_ptr<shardgym::SimRun> sim;
  try {
    sim = std::make_unique<shardgym::SimRun>(spec);
  } catch (const std::invalid_argument&) {
    return;  // documented: the fitted figures make the cluster invalid
  }
  const int blocks = spec.model.num_blocks();
  for (const char* text : {"uniform:dp", "uniform:tp1d(t=2)@pp(p=2,m=4)"}) {
    const shardgym::Plan plan = shardgym::Plan::parse(text, blocks);
    sim->reset(0, plan);
    shardgym::Measurement m;
    sim->step_into(plan, m);
    (void)sim->breakdown(plan);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  shardgym::CalibrationFile c;
  try {
    c = shardgym::parse_calibration_file(text, "calib.yaml");
  } catch (const shardgym::ConfigError& e) {
    FUZZ_CHECK(e.file() == "calib.yaml", e.what());
    return 0;
  }
  const std::string written = shardgym::calibration_to_yaml(c);
  shardgym::CalibrationFile again;
  try {
    again = shardgym::parse_calibration_file(written, "calib.yaml");
  } catch (const shardgym::ConfigError& e) {
    FUZZ_CHECK(false, std::string("a file read back refused: ") + e.what());
  }
  FUZZ_CHECK(shardgym::calibration_to_yaml(again) == written, "written twice, two texts");
  FUZZ_CHECK(c.runtime.blocks.size() <= (1u << 16) && c.collectives.size() <= (1u << 16) &&
                 c.pipelines.size() <= (1u << 10),
             "row limits");
  for (const auto& p : c.pipelines)
    FUZZ_CHECK(p.plan.size() <= 256 && p.plan.find('@') != std::string::npos, p.plan);
  shardgym::ExperimentSpec spec = base_spec();
  const std::string why = shardgym::apply_calibration(c, "calib.yaml", spec.cluster);
  if (why.empty()) price(spec);
  return 0;
}
