// The text checkpoints of the search agents (greedy, random-search, anneal; Agent::load_text,
// agents/checkpoint_file.h) on arbitrary bytes, and the record file of the plan search around
// a learner (agents/polished.h: its tables and the learner's nested bytes, here a stub
// learner's text state). The first byte picks the agent; the rest is the file. Expected errors are std::runtime_error. A checkpoint that loads must leave an
// agent that acts within the mask and learns without touching memory outside its state:
// twelve act/observe rounds on a fixed observation follow (greedy's propose indexes its
// incumbent by the saved sweep's moves, the heap write ASan would catch).
// The version-1 layout (no CRC line) is still read, so most inputs reach the value checks
// without having to forge a CRC.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "agents/agent.h"
#include "agents/agent_util.h"
#include "agents/polished.h"
#include "env/registry.h"
#include "fuzz/fuzz_check.h"
#include "tests/env/test_specs.h"

using namespace shardgym;

namespace {

struct Fixture {
  std::unique_ptr<Env> env;
  Observation obs;
  std::vector<int32_t> plan;  // the plan in force (Info::plan_indices)
  std::vector<uint8_t> mask;
  Fixture() {
    ExperimentSpec s = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/1);
    s.steps_per_episode = 8;
    env = make_env("shardgym/TPSim-v0", s);
    ResetResult start = env->reset(0);
    obs = std::move(start.obs);
    plan = std::move(start.info.plan_indices);
    mask = env->action_mask();
  }
};

const char* const kAgents[] = {"greedy", "greedy(scope=kind)", "random-search(budget=4)",
                               "anneal", "polished(stub)"};
constexpr int kNumAgents = 5;

// A vectorised learner with nothing to learn: it plays the first allowed entry of each block
// (what the tables then substitute), and its checkpoint is the default text one.
class Stub : public Agent, public VectorLearner {
 public:
  explicit Stub(const EnvSpec& spec)
      : blocks_(spec.num_blocks), catalog_(spec.catalog_size),
        moves_(agents_detail::pipeline_moves(spec)) {}
  std::string name() const override { return "stub"; }
  Action act(const Observation&, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>&) override {
    const auto allowed = agents_detail::allowed_entries(mask, blocks_, catalog_, moves_);
    Action a(blocks_);
    for (int b = 0; b < blocks_; ++b) a[b] = allowed[b].front();
    if (moves_ > 0) a.push_back(0);
    return a;
  }
  VectorLearner* vector_learner() override { return this; }
  void train_vectorized(VectorEnv&, int64_t,
                        const std::function<bool(const TrainProgress&)>&) override {}
  uint64_t draw_seed() override { return 0; }
  void drop_episode(int) override {}

 private:
  int blocks_, catalog_, moves_;
};

std::unique_ptr<Agent> agent_of(int a, const EnvSpec& spec, uint64_t seed) {
  if (a < 4) return make_agent(kAgents[a], spec, seed);
  return std::make_unique<Polished>(std::make_unique<Stub>(spec), spec, 1, 1e-3);
}

// SHARDGYM_FUZZ_WRITE_SEEDS=DIR: writes the seed corpus (fuzz/corpus/agent_checkpoint_fuzz/):
// each agent's state after some act/observe rounds, as saved (version 2, with its CRC line)
// and as version 1 (no CRC line), each behind its selector byte.
void write_seeds(const Fixture& fx, const std::string& dir) {
  for (int a = 0; a < 4; ++a) {
    std::unique_ptr<Agent> agent = agent_of(a, fx.env->spec(), 7);
    for (int i = 0; i < 9; ++i) {
      const Action act = agent->act(fx.obs, fx.mask, fx.plan);
      agent->observe({fx.obs, act, 1.0 + 0.01 * (i % 5), fx.obs, false, false, false});
    }
    const std::string file = dir + "/seed-" + std::to_string(a);
    agent->save(file);
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(file, std::ios::binary) << static_cast<char>(a) << text;
    // Version 1: the payload without the CRC line, its header's version set to 1.
    std::string v1 = text.substr(0, text.rfind("crc32 "));
    v1.replace(v1.find(" 2\n"), 3, " 1\n");
    std::ofstream(file + "-v1", std::ios::binary) << static_cast<char>(a) << v1;
  }
  // The plan search's record file around the stub (identity tables, the stub's text state).
  std::ofstream(dir + "/seed-4", std::ios::binary)
      << static_cast<char>(4) << agent_of(4, fx.env->spec(), 7)->save_bytes();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  static const bool seeded = [] {
    if (const char* dir = std::getenv("SHARDGYM_FUZZ_WRITE_SEEDS")) write_seeds(fx, dir);
    return true;
  }();
  (void)seeded;
  if (size == 0) return 0;
  const int pick = data[0] % kNumAgents;
  const std::string id = kAgents[pick];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::unique_ptr<Agent> agent = agent_of(pick, fx.env->spec(), 1);
  try {
    agent->load_bytes(bytes, "fuzz");
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (pick == 4) agent->set_training(false);  // the tables apply in evaluation
  const int K = fx.env->spec().catalog_size;
  for (int i = 0; i < 12; ++i) {
    const Action a = agent->act(fx.obs, fx.mask, fx.plan);
    FUZZ_CHECK(agents_detail::action_allowed(a, fx.mask, K), id + ": action outside the mask");
    agent->observe({fx.obs, a, 1.0 + 0.01 * (i % 5), fx.obs, false, i == 11, false});
    agent->update();
  }
  return 0;
}
