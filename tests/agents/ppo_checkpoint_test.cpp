// PPO checkpoints are untrusted input (agents/checkpoint_file.h, docs/robustness.md): a
// TorchScript archive (the earlier format, whose code would run at load) is refused with a
// message, a record of the wrong shape or a declared size beyond the file is refused before
// anything is allocated or changed, every flipped bit is caught, and a FIFO is refused.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "agents/checkpoint_file.h"
#include "agents/ppo.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

const char* kId = "ppo(rollout=8,minibatches=2,epochs=1,hidden=8)";

std::string temp_path(const std::string& tag) {
  return agent_tests::temp_path("shardgym_ppo_ckpt_", tag);
}
using agent_tests::slurp;

class PPOCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    env = agent_tests::sim_env(agent_tests::sim_spec(2, 10));
    config = PPOConfig::from_id(ParsedId::parse(kId));
    trained = std::make_unique<PPO>(env->spec(), config, 1, kId);
    agent_tests::rollout(*env, *trained, 0, 2, true);  // an update, Adam state, a rollout
    file = temp_path("saved");
    trained->save(file);
    bytes = slurp(file);
  }
  void TearDown() override { std::remove(file.c_str()); }
  std::unique_ptr<PPO> fresh() { return std::make_unique<PPO>(env->spec(), config, 2, kId); }
  std::unique_ptr<Env> env;
  PPOConfig config;
  std::unique_ptr<PPO> trained;
  std::string file, bytes;
};

TEST_F(PPOCheckpoint, RoundTripActsTheSame) {
  auto back = fresh();
  back->load(file);
  auto env_a = agent_tests::sim_env(agent_tests::sim_spec(2, 10));
  auto env_b = agent_tests::sim_env(agent_tests::sim_spec(2, 10));
  EXPECT_EQ(agent_tests::rollout(*env_a, *trained, 5, 2, true).actions,
            agent_tests::rollout(*env_b, *back, 5, 2, true).actions);
}

TEST_F(PPOCheckpoint, TorchScriptArchiveIsRefused) {
  const std::string old = temp_path("archive");
  torch::serialize::OutputArchive a;
  a.write("header", torch::tensor({int64_t{3}, int64_t{4}}));
  a.save_to(old);
  try {
    fresh()->load(old);
    ADD_FAILURE() << "a TorchScript archive loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("TorchScript archive"), std::string::npos) << e.what();
  }
  std::remove(old.c_str());
}

TEST_F(PPOCheckpoint, EveryFlippedBitIsRefused) {
  // Every 97th byte (the file is a few hundred KB; the CRC covers all of it).
  auto back = fresh();
  for (size_t i = 0; i < bytes.size(); i += 97) {
    std::string b = bytes;
    b[i] ^= 0x04;
    EXPECT_THROW(back->load_bytes(b, "flip"), std::runtime_error) << "byte " << i;
  }
}

// Re-encodes the saved checkpoint with one record changed (valid CRC): only the checks
// against the config can refuse it.
std::string with_record(const std::string& bytes, const std::string& name,
                        checkpoint::Elem dtype, std::vector<int64_t> shape,
                        const std::string& data) {
  checkpoint::RecordFile f = checkpoint::RecordFile::decode(bytes, "t", 1000);
  checkpoint::Record r;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.data = data;
  f.records[name] = r;
  return f.encode();
}

TEST_F(PPOCheckpoint, RecordsAreCheckedAgainstTheConfig) {
  auto back = fresh();
  std::string net_key;
  for (const auto& [name, r] : checkpoint::RecordFile::decode(bytes, "t", 1000).records)
    if (name.rfind("net/", 0) == 0) net_key = name;
  ASSERT_FALSE(net_key.empty());
  // A parameter of another shape.
  EXPECT_THROW(back->load_bytes(with_record(bytes, net_key, checkpoint::Elem::kF32, {3},
                                            std::string(12, '\0')),
                                "t"),
               std::runtime_error);
  // A NaN parameter of the right shape.
  checkpoint::Record p = checkpoint::RecordFile::decode(bytes, "t", 1000).records.at(net_key);
  const float nan = std::nanf("");
  std::memcpy(p.data.data(), &nan, sizeof nan);
  EXPECT_THROW(back->load_bytes(with_record(bytes, net_key, p.dtype, p.shape, p.data), "t"),
               std::runtime_error);
  // An action entry past the catalog in the rollout.
  checkpoint::Record act = checkpoint::RecordFile::decode(bytes, "t", 1000).records.at("buf_act");
  ASSERT_GT(act.data.size(), 0u);
  const int64_t big = 1 << 20;
  std::memcpy(act.data.data(), &big, sizeof big);
  EXPECT_THROW(back->load_bytes(with_record(bytes, "buf_act", act.dtype, act.shape, act.data),
                                "t"),
               std::runtime_error);
  // A rollout longer than rollout=8.
  EXPECT_THROW(back->load_bytes(with_record(bytes, "buf_value", checkpoint::Elem::kF32, {9},
                                            std::string(36, '\0')),
                                "t"),
               std::runtime_error);
  // The loaded agent is untouched by the refused files: it still loads the good one.
  EXPECT_NO_THROW(back->load_bytes(bytes, "good"));
}

TEST_F(PPOCheckpoint, OversizedAndNonRegularFilesAreRefused) {
  const std::string big = temp_path("big");
  {
    std::ofstream out(big, std::ios::binary);
    out << bytes << std::string(64 << 20, '\0');
  }
  EXPECT_THROW(fresh()->load(big), std::runtime_error);
  std::remove(big.c_str());
  const std::string fifo = temp_path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(fresh()->load(fifo), std::runtime_error);  // O_NONBLOCK: never blocks
  ::unlink(fifo.c_str());
}

}  // namespace
}  // namespace shardgym
