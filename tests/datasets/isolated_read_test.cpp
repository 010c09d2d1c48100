// read_isolated: the child's result, error, crash, hang and memory blow-up each come back as
// the result or as a std::runtime_error, within the time limit, and no child is left behind.
// Also the wire format between them: a round trip, and garbage refused without a crash.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "datasets/isolated_read.h"
#include "datasets/trace_wire.h"

namespace shardgym {
namespace {

// The message of the runtime_error read_isolated throws for `work` ("" if none).
std::string error_of(const std::function<void(std::string&)>& work, double timeout_s = 10) {
  IsolationLimits limits;
  limits.timeout_s = timeout_s;
  limits.max_extra_memory_bytes = 256u << 20;
  try {
    read_isolated("trace 'x.h5'", limits, work);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// No child of this process is left, running or as a zombie.
void expect_no_children() {
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child process is left behind";
  EXPECT_EQ(errno, ECHILD);
}

TEST(IsolatedRead, ReturnsWhatTheChildProduced) {
  const std::string big(3 << 20, 'x');  // larger than a pipe's buffer
  EXPECT_EQ(read_isolated("t", {}, [&](std::string& out) { out = "ok" + big; }), "ok" + big);
  expect_no_children();
}

TEST(IsolatedRead, ChildExceptionIsRethrownWithItsMessage) {
  EXPECT_EQ(error_of([](std::string&) { throw std::runtime_error("trace 'x.h5': bad shape"); }),
            "trace 'x.h5': bad shape");
  expect_no_children();
}

TEST(IsolatedRead, CrashOfTheChildIsAnError) {
  const std::string e = error_of([](std::string&) { raise(SIGSEGV); });
  // A signal, or under a sanitizer its report and exit status 1.
  EXPECT_NE(e.find("trace 'x.h5': the HDF5 library "),
            std::string::npos)
      << e;
  expect_no_children();
}

TEST(IsolatedRead, HangIsStoppedAtTheTimeLimit) {
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([](std::string&) { for (;;) pause(); }, 0.5);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e.find("did not finish within 0.5"), std::string::npos) << e;
  EXPECT_LT(s, 3.0);
  expect_no_children();
}

TEST(IsolatedRead, MemoryBeyondTheAllowanceIsAnError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "no address-space limit under AddressSanitizer";
#endif
  const std::string e = error_of([](std::string&) {
    std::vector<std::vector<char>> hog;
    for (int i = 0; i < 64; ++i) hog.emplace_back(64u << 20, 'x');  // 4 GiB
  });
  EXPECT_NE(e.find("needed more than the 256 MiB allowed"), std::string::npos) << e;
  expect_no_children();
}

TEST(IsolatedRead, OversizedReplyIsAnError) {
  IsolationLimits limits;
  limits.max_reply_bytes = 1000;
  EXPECT_THROW(read_isolated("t", limits, [](std::string& out) { out.assign(5000, 'x'); }),
               std::runtime_error);
  expect_no_children();
}

TraceEpisode sample_episode() {
  TraceEpisode ep;
  ep.info.name = "episode_3";
  ep.info.index = 3;
  ep.info.complete = true;
  ep.info.steps = 2;
  ep.info.agent = "ppo";
  ep.obs_dim = 3;
  ep.action_dim = 2;
  ep.num_blocks = 2;
  ep.world = 1;
  ep.observations = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ep.actions = {0, 1, 1, 0};
  ep.plans = {4, 5, 6, 7};
  ep.rewards = {0.5, -1};
  ep.terminations = {0, 1};
  ep.truncations = {0, 0};
  for (auto* v : {&ep.step_latency_s, &ep.repartition_s, &ep.repartition_bytes, &ep.energy_j,
                  &ep.tokens, &ep.loss, &ep.peak_memory_bytes, &ep.repartition_peak_bytes}) {
    *v = {1.5, 2.5};
  }
  ep.ok = {1, 1};
  ep.oom = {0, 0};
  for (auto* v : {&ep.block_fwd_s, &ep.block_bwd_s, &ep.block_comm_s}) *v = {1, 2, 3, 4};
  ep.scalars["gain"] = {0.1, 0.2};
  ep.initial.step_latency_s = 0.25;
  ep.initial.block_fwd_s = {1, 2};
  ep.initial.error = "none";
  return ep;
}

TEST(TraceWire, RoundTrip) {
  TraceHeader h;
  h.attributes.format = "shardgym-trace";
  h.attributes.version = 1;
  h.attributes.config = "model: {}";
  h.strategies = {"dp", "tp1d(t=2)"};
  h.episodes.resize(2);
  h.episodes[1].name = "episode_1";
  h.episodes[1].seed = 42;
  const TraceHeader back = decode_header(encode(h));
  EXPECT_EQ(back.attributes.config, "model: {}");
  EXPECT_EQ(back.strategies, h.strategies);
  ASSERT_EQ(back.episodes.size(), 2u);
  EXPECT_EQ(back.episodes[1].seed, 42u);

  const TraceEpisode ep = sample_episode();
  const TraceEpisode e2 = decode_episode(encode(ep));
  EXPECT_EQ(e2.observations, ep.observations);
  EXPECT_EQ(e2.plans, ep.plans);
  EXPECT_EQ(e2.block_comm_s, ep.block_comm_s);
  EXPECT_EQ(e2.scalars.at("gain"), ep.scalars.at("gain"));
  EXPECT_EQ(e2.initial.block_fwd_s, ep.initial.block_fwd_s);
  EXPECT_EQ(e2.initial.error, "none");
}

// Every truncation and many random corruptions of a valid message: a runtime_error or a
// message whose arrays agree with their shapes, never a crash or a huge allocation.
TEST(TraceWire, DamagedMessagesAreRefused) {
  const std::string good = encode(sample_episode());
  for (size_t keep = 0; keep < good.size(); ++keep) {
    EXPECT_THROW(decode_episode(good.substr(0, keep)), std::runtime_error) << keep;
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    try {
      const TraceEpisode ep = decode_episode(bad);
      EXPECT_EQ(ep.plans.size(), ep.rewards.size() * size_t(ep.num_blocks));
    } catch (const std::runtime_error&) {
    }
    try {
      decode_header(bad);
    } catch (const std::runtime_error&) {
    }
  }
}

}  // namespace
}  // namespace shardgym
