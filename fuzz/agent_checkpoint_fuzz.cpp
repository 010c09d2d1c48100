// The text checkpoints of the search agents (greedy, random-search, anneal; Agent::load_text,
// agents/checkpoint_file.h) on arbitrary bytes. The first byte picks the agent; the rest is
// the file. Expected errors are std::runtime_error. A checkpoint that loads must leave an
// agent that acts within the mask and learns without touching memory outside its state:
// twelve act/observe rounds on a fixed observation follow (greedy's propose indexes its
// incumbent by the saved sweep's moves, the heap write ASan would catch).
// The version-1 layout (no CRC line) is still read, so most inputs reach the value checks
// without having to forge a CRC.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "agents/agent.h"
#include "agents/agent_util.h"
#include "env/registry.h"
#include "fuzz/fuzz_check.h"
#include "tests/env/test_specs.h"

using namespace shardgym;

namespace {

struct Fixture {
  std::unique_ptr<Env> env;
  Observation obs;
  std::vector<uint8_t> mask;
  Fixture() {
    ExperimentSpec s = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/1);
    s.steps_per_episode = 8;
    env = make_env("shardgym/TPSim-v0", s);
    obs = env->reset(0).obs;
    mask = env->action_mask();
  }
};

const char* const kAgents[] = {"greedy", "greedy(scope=kind)", "random-search(budget=4)",
                               "anneal"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  if (size == 0) return 0;
  const std::string id = kAgents[data[0] % 4];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::unique_ptr<Agent> agent = make_agent(id, fx.env->spec(), 1);
  try {
    agent->load_text(bytes, "fuzz");
  } catch (const std::runtime_error&) {
    return 0;
  }
  const int K = fx.env->spec().catalog_size;
  for (int i = 0; i < 12; ++i) {
    const Action a = agent->act(fx.obs, fx.mask);
    FUZZ_CHECK(agents_detail::action_allowed(a, fx.mask, K), id + ": action outside the mask");
    agent->observe({fx.obs, a, 1.0 + 0.01 * (i % 5), fx.obs, false, i == 11, false});
    agent->update();
  }
  return 0;
}
