// Checkpoints are untrusted input (agents/checkpoint_file.h, docs/robustness.md): crafted
// text checkpoints of the search agents are refused before any value is used, a FIFO is
// refused at once, sizes are capped by the config, a flipped bit is caught by the CRC, and a
// save replaces a symbolic link instead of writing through it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include <gtest/gtest.h>

#include "agents/checkpoint_file.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& tag) {
  return agent_tests::temp_path("shardgym_ckpt_test_", tag);
}
using agent_tests::slurp;

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A trained greedy agent's state as text (the payload, without the CRC line), in the
// version-1 layout: the layout earlier releases read, so a crafted file of this form is what
// an old reader would accept.
std::string greedy_v1_text(Agent& agent) {
  const std::string file = temp_path("greedy_src");
  agent.save(file);
  std::string payload = checkpoint::unseal_text(slurp(file), file);
  std::remove(file.c_str());
  EXPECT_EQ(payload.rfind("shardgym-agent 2\n", 0), 0u);
  return "shardgym-agent 1\n" + payload.substr(std::string("shardgym-agent 2\n").size());
}

// The greedy state's lines after the rng line: pending plan, settle count, incumbent,
// rewards, flags/sweep line, moves.
struct GreedyText {
  std::vector<std::string> lines;
  static GreedyText parse(const std::string& text) {
    GreedyText g;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) g.lines.push_back(l);
    return g;
  }
  std::string str() const {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
};

class SearchCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    env = agent_tests::sim_env(agent_tests::sim_spec(2, 10));
    trained = make_agent("greedy", env->spec(), 3);
    agent_tests::rollout(*env, *trained, 0, 1, true);
  }
  // Loads `text` (version 1, no CRC) into a fresh greedy agent; then acts a few steps.
  void load_and_act(const std::string& text) {
    const std::string file = temp_path("crafted");
    spit(file, text);
    auto fresh = make_agent("greedy", env->spec(), 4);
    try {
      fresh->load(file);
    } catch (...) {
      std::remove(file.c_str());
      throw;
    }
    std::remove(file.c_str());
    agent_tests::rollout(*env, *fresh, 1, 1, true);
  }
  std::unique_ptr<Env> env;
  std::unique_ptr<Agent> trained;
};

TEST_F(SearchCheckpoint, VersionOneStillLoads) {
  EXPECT_NO_THROW(load_and_act(greedy_v1_text(*trained)));
}

// The sweep's moves index the incumbent (propose: a[unit] = k): a unit past the blocks, an
// entry past the catalog, a sweep length the config cannot produce, a short incumbent.
TEST_F(SearchCheckpoint, CraftedSweepIsRefused) {
  const GreedyText base = GreedyText::parse(greedy_v1_text(*trained));
  const size_t n = base.lines.size();
  // Layout: magic, name, rng, pending, settle, incumbent, reward, settled, flags, moves...
  ASSERT_GE(n, 9u);
  const std::string incumbent = base.lines[5];
  auto with = [&](size_t line, const std::string& text, size_t keep) {
    GreedyText g = base;
    g.lines.resize(keep);
    g.lines[line] = text;
    return g.str();
  };
  // converged=0 improved=0 next=0, one move: unit 70000 (a 4-byte heap write far away).
  EXPECT_THROW(load_and_act(with(8, "0 0 0 1", 9) + "70000 5\n"), std::runtime_error);
  EXPECT_THROW(load_and_act(with(8, "0 0 0 1", 9) + "-3 1\n"), std::runtime_error);
  EXPECT_THROW(load_and_act(with(8, "0 0 0 1", 9) + "0 100000\n"), std::runtime_error);
  // A sweep length that would allocate terabytes.
  EXPECT_THROW(load_and_act(with(8, "0 0 0 100000000000", 9)), std::runtime_error);
  EXPECT_THROW(load_and_act(with(8, "0 0 5 1", 9) + "0 1\n"), std::runtime_error);  // next > size
  // An incumbent of one block (the config has 4), then a move of block 3.
  GreedyText g = base;
  g.lines.resize(9);
  g.lines[5] = "1 0";
  g.lines[8] = "0 0 0 1";
  EXPECT_THROW(load_and_act(g.str() + "3 1\n"), std::runtime_error);
  // An entry of the incumbent past the catalog.
  g = base;
  g.lines[5] = "4 0 0 0 99999";
  EXPECT_THROW(load_and_act(g.str()), std::runtime_error);
  (void)incumbent;
}

TEST_F(SearchCheckpoint, FlippedBitIsCaughtByTheCrc) {
  const std::string file = temp_path("flip");
  trained->save(file);
  std::string bytes = slurp(file);
  // A digit of the rng state (line 3): still a valid number, so only the CRC can tell.
  const size_t at = bytes.find('\n', bytes.find('\n') + 1) + 5;
  ASSERT_LT(at, bytes.size());
  bytes[at] = bytes[at] == '1' ? '2' : '1';
  spit(file, bytes);
  auto fresh = make_agent("greedy", env->spec(), 4);
  EXPECT_THROW(fresh->load(file), std::runtime_error);
  std::remove(file.c_str());
}

TEST_F(SearchCheckpoint, OversizedFileIsRefusedBeforeReading) {
  const std::string file = temp_path("big");
  spit(file, greedy_v1_text(*trained) + std::string(8 << 20, ' '));
  auto fresh = make_agent("greedy", env->spec(), 4);
  try {
    fresh->load(file);
    ADD_FAILURE() << "an 8 MiB greedy checkpoint loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than"), std::string::npos) << e.what();
  }
  std::remove(file.c_str());
}

// A FIFO would block a reader forever (ifstream opens it and waits for a writer).
TEST_F(SearchCheckpoint, FifoIsRefusedAtOnce) {
  const std::string fifo = temp_path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto fresh = make_agent("greedy", env->spec(), 4);
  auto done = std::async(std::launch::async, [&] {
    try {
      fresh->load(fifo);
      return std::string("loaded");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  });
  const bool finished = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!finished) {  // unblock the reader, so the test ends either way
    int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  const std::string what = done.get();
  ::unlink(fifo.c_str());
  EXPECT_TRUE(finished) << "load of a FIFO blocked";
  EXPECT_NE(what.find("not a regular file"), std::string::npos) << what;
}

// `train --out` and every save: a symbolic link at the destination is replaced, its target
// left as it was.
TEST_F(SearchCheckpoint, SaveDoesNotWriteThroughASymlink) {
  const std::string target = temp_path("victim"), link = temp_path("link");
  spit(target, "precious\n");
  std::remove(link.c_str());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  trained->save(link);
  EXPECT_EQ(slurp(target), "precious\n");
  EXPECT_FALSE(fs::is_symlink(link));
  auto fresh = make_agent("greedy", env->spec(), 4);
  EXPECT_NO_THROW(fresh->load(link));
  std::remove(target.c_str());
  std::remove(link.c_str());
}

TEST(CheckpointFile, RecordFileRoundTripAndDamage) {
  checkpoint::RecordFile f;
  f.kind = "test";
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  f.put("w", checkpoint::Elem::kF32, {2, 3}, w.data());
  const std::string bytes = f.encode();
  const checkpoint::RecordFile back = checkpoint::RecordFile::decode(bytes, "t", 4);
  EXPECT_EQ(back.get("w", checkpoint::Elem::kF32, {2, 3}, "t").data, f.records.at("w").data);
  EXPECT_THROW(back.get("w", checkpoint::Elem::kF32, {3, 2}, "t"), std::runtime_error);
  for (size_t i = 0; i < bytes.size(); ++i) {  // every single-bit flip is refused
    std::string b = bytes;
    b[i] ^= 0x10;
    EXPECT_THROW(checkpoint::RecordFile::decode(b, "t", 4), std::runtime_error) << "byte " << i;
  }
  EXPECT_THROW(checkpoint::RecordFile::decode(bytes.substr(0, bytes.size() - 1), "t", 4),
               std::runtime_error);
}

}  // namespace
}  // namespace shardgym
