// Gloo CommWorld and the thread launcher: every collective against a locally computed result,
// groups over subsets and over every standard factorisation, caching, failure propagation.
#include <atomic>
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "runtime/live/comm/gloo.h"
#include "runtime/live/launch/thread_ranks.h"
#include "tests/live/thread_count.h"

namespace shardgym::live {
namespace {

constexpr double kTimeout = 20;  // generous: only the failure tests wait for a timeout

// Rank r's contribution: deterministic, distinct per rank, exactly representable in double.
at::Tensor contribution(int r, at::IntArrayRef shape) {
  const int64_t n = c10::multiply_integers(shape);
  return (at::arange(n, at::kDouble) * 10 + r).reshape(shape);
}

at::Tensor expected_sum(const std::vector<int>& ranks, at::IntArrayRef shape) {
  at::Tensor s = at::zeros(shape, at::kDouble);
  for (int r : ranks) s += contribution(r, shape);
  return s;
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

using testing::thread_count;

// Exact comparisons: sums of small integers in double are exact, so equality is the check.
void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(at::equal(got, want)) << what;
}

class CommWorlds : public ::testing::TestWithParam<int> {};

TEST_P(CommWorlds, AllReduceSumsInPlaceIncludingNonContiguous) {
  const int p = GetParam();
  run_threads(
      p,
      [&](CommWorld& w) {
        at::Tensor t = contribution(w.rank(), {3, 5});
        w.world().all_reduce(t);
        expect_equal(t, expected_sum(iota(p), {3, 5}), "contiguous");
        at::Tensor base = contribution(w.rank(), {5, 3});
        at::Tensor tr = base.t();  // non-contiguous view: the result lands in `base`
        w.world().all_reduce(tr);
        expect_equal(base, expected_sum(iota(p), {5, 3}), "transposed view");
      },
      kTimeout);
}

TEST_P(CommWorlds, AllGatherConcatenatesAlongEveryDim) {
  const int p = GetParam();
  run_threads(
      p,
      [&](CommWorld& w) {
        for (int64_t dim : {0, 1, 2, -1}) {
          at::Tensor mine = contribution(w.rank(), {2, 3, 4});
          at::Tensor got = w.world().all_gather(mine, dim);
          std::vector<at::Tensor> parts;
          for (int r = 0; r < p; ++r) parts.push_back(contribution(r, {2, 3, 4}));
          expect_equal(got, at::cat(parts, dim), "dim " + std::to_string(dim));
        }
        at::Tensor nc = contribution(w.rank(), {4, 2}).t();
        std::vector<at::Tensor> parts;
        for (int r = 0; r < p; ++r) parts.push_back(contribution(r, {4, 2}).t());
        expect_equal(w.world().all_gather(nc, 1), at::cat(parts, 1), "non-contiguous input");
      },
      kTimeout);
}

TEST_P(CommWorlds, ReduceScatterGivesThisRanksSliceOfTheSum) {
  const int p = GetParam();
  run_threads(
      p,
      [&](CommWorld& w) {
        for (int64_t dim : {0, 1, 2}) {
          std::vector<int64_t> shape{2, 3, 4};
          shape[dim] *= p;
          at::Tensor mine = contribution(w.rank(), shape);
          at::Tensor got = w.world().reduce_scatter(mine, dim);
          at::Tensor want = expected_sum(iota(p), shape).chunk(p, dim)[w.rank()];
          expect_equal(got, want, "dim " + std::to_string(dim));
          EXPECT_TRUE(got.is_contiguous());
          expect_equal(mine, contribution(w.rank(), shape), "input untouched");
        }
        if (p > 1) {
          at::Tensor odd = at::ones({p + 1, 2}, at::kDouble);
          EXPECT_THROW(w.world().reduce_scatter(odd, 0), std::invalid_argument);
        }
      },
      kTimeout);
}

TEST_P(CommWorlds, BroadcastFromEveryRoot) {
  const int p = GetParam();
  run_threads(
      p,
      [&](CommWorld& w) {
        for (int root = 0; root < p; ++root) {
          at::Tensor t = contribution(w.rank(), {7});
          w.world().broadcast(t, root);
          expect_equal(t, contribution(root, {7}), "root " + std::to_string(root));
        }
      },
      kTimeout);
}

TEST_P(CommWorlds, SendRecvAroundTheRing) {
  const int p = GetParam();
  run_threads(
      p,
      [&](CommWorld& w) {
        at::Tensor self = at::ones({2}, at::kDouble);
        EXPECT_THROW(w.world().send(self, w.rank()), std::invalid_argument) << "no send to self";
        if (p == 1) return;
        const int next = (w.rank() + 1) % p, prev = (w.rank() + p - 1) % p;
        at::Tensor out = contribution(w.rank(), {4, 4});
        at::Tensor in = at::empty({4, 4}, at::kDouble);
        // Even ranks send first, odd ranks receive first: no cycle of blocking sends.
        if (w.rank() % 2 == 0) {
          w.world().send(out, next);
          w.world().recv(in, prev);
        } else {
          w.world().recv(in, prev);
          w.world().send(out, next);
        }
        expect_equal(in, contribution(prev, {4, 4}), "from previous rank");
      },
      kTimeout);
}

TEST_P(CommWorlds, EveryStandardGroupWorksAndIsCreatedOnce) {
  const int p = GetParam();
  const auto sets = standard_group_sets(p);
  run_threads(
      p,
      [&](CommWorld& w) {
        auto& gw = dynamic_cast<GlooCommWorld&>(w);
        create_standard_groups(w);
        const int created = gw.groups_created();
        for (const auto& g : sets) {
          if (!std::binary_search(g.begin(), g.end(), w.rank())) continue;
          Comm& c = w.group(g);
          EXPECT_EQ(&c, &w.group(g)) << "cached";
          EXPECT_EQ(c.global_ranks(), g);
          EXPECT_EQ(c.size(), static_cast<int>(g.size()));
          EXPECT_EQ(g[c.rank()], w.rank());
          at::Tensor t = contribution(w.rank(), {6});
          c.all_reduce(t);
          expect_equal(t, expected_sum(g, {6}), "group " + format_ranks(g));
          at::Tensor gathered = c.all_gather(at::full({1}, double(w.rank()), at::kDouble), 0);
          at::Tensor want = at::empty({static_cast<int64_t>(g.size())}, at::kDouble);
          for (size_t i = 0; i < g.size(); ++i) want[i] = g[i];
          expect_equal(gathered, want, "members in rank order");
        }
        create_standard_groups(w);
        EXPECT_EQ(gw.groups_created(), created) << "second request must not create groups";
      },
      kTimeout);
}

INSTANTIATE_TEST_SUITE_P(Worlds, CommWorlds, ::testing::Values(1, 2, 3, 4));

TEST(StandardGroups, FourRanksListsTpDpAndMeshAxes) {
  const std::vector<std::vector<int>> want = {
      {0},    {1},    {2},    {3},    {0, 1, 2, 3},  // t=1: singletons, DP over all
      {0, 1}, {2, 3}, {0, 2}, {1, 3},  // t=2: TP pairs, DP pairs; t=4 2x2 mesh axes repeat them
  };
  EXPECT_EQ(standard_group_sets(4), want);
  // Eight ranks: t=8 with a 2x4 mesh adds strided axis-0 groups {0,4},{1,5},...
  const auto eight = standard_group_sets(8);
  EXPECT_NE(std::find(eight.begin(), eight.end(), std::vector<int>{1, 5}), eight.end());
  EXPECT_NE(std::find(eight.begin(), eight.end(), std::vector<int>{4, 5, 6, 7}), eight.end());
  EXPECT_NE(std::find(eight.begin(), eight.end(), std::vector<int>{0, 2, 4, 6}), eight.end());
  for (int p : {1, 2, 3, 4, 6, 8, 12}) {
    for (const auto& g : standard_group_sets(p)) {
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
      EXPECT_EQ(p % static_cast<int>(g.size()), 0) << format_ranks(g);
    }
  }
}

TEST(Groups, SubsetsOnlyTalkAmongMembers) {
  run_threads(
      4,
      [&](CommWorld& w) {
        const std::vector<int> mine =
            w.rank() % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
        at::Tensor t = contribution(w.rank(), {3});
        w.group(mine).all_reduce(t);
        expect_equal(t, expected_sum(mine, {3}), "strided pair");
        EXPECT_THROW(w.group({(w.rank() + 1) % 4}), std::invalid_argument);  // not a member
        EXPECT_THROW(w.group({2, 0}), std::invalid_argument);                // unsorted
        EXPECT_EQ(w.group(mine).name(), "group" + format_ranks(mine));
      },
      kTimeout);
}

TEST(Stats, CountCallsTimeAndRingBytes) {
  run_threads(
      2,
      [&](CommWorld& w) {
        Comm& c = w.world();
        c.stats() = {};
        at::Tensor t = at::ones({100}, at::kDouble);  // 800 bytes
        c.all_reduce(t);
        c.all_gather(t, 0);
        EXPECT_EQ(c.stats().calls, 2);
        EXPECT_DOUBLE_EQ(c.stats().bytes, 800.0 + 800.0);  // ring: 2(p-1)/p·X, then (p-1)·X
        EXPECT_GT(c.stats().wait_s, 0.0);
      },
      kTimeout);
}

TEST_P(CommWorlds, AllReduceAsyncSumsOnWaitIncludingNonContiguous) {
  const int p = GetParam();
  run_threads(
      p,
      [&](CommWorld& w) {
        at::Tensor t = contribution(w.rank(), {3, 5});
        at::Tensor base = contribution(w.rank(), {5, 3});
        at::Tensor tr = base.t();  // non-contiguous: the result lands in `base` on wait()
        auto a = w.world().all_reduce_async(t);
        auto b = w.world().all_reduce_async(tr);  // two in flight on one group
        b->wait();
        a->wait();
        a->wait();  // idempotent
        EXPECT_TRUE(a->completed());
        expect_equal(t, expected_sum(iota(p), {3, 5}), "contiguous");
        expect_equal(base, expected_sum(iota(p), {5, 3}), "transposed view");
      },
      kTimeout);
}

// The overlap is real: the collective is started, the caller computes while it is in flight
// (a peer is late, so it cannot finish before), and wait() blocks only for what is left.
TEST(AllReduceAsync, ReturnsBeforeCompletionAndWaitsOnlyForTheRest) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kLate = std::chrono::milliseconds(400);
  run_threads(
      2,
      [&](CommWorld& w) {
        Comm& c = w.world();
        c.stats() = {};
        at::Tensor t = contribution(w.rank(), {1000});
        if (w.rank() == 1) std::this_thread::sleep_for(kLate);
        const auto t0 = Clock::now();
        auto work = c.all_reduce_async(t);
        const double start_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (w.rank() == 0) {
          EXPECT_LT(start_s, 0.2) << "the start must not wait for the late peer";
          EXPECT_FALSE(work->completed()) << "cannot be done: the peer has not joined";
          // Compute while it is in flight: 200 ms of matrix products.
          at::Tensor m = at::rand({64, 64}, at::kDouble), acc = at::zeros({64, 64}, at::kDouble);
          while (Clock::now() - t0 < std::chrono::milliseconds(200)) acc += at::mm(m, m);
          EXPECT_FALSE(work->completed()) << "still in flight while computing";
        }
        work->wait();
        const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
        expect_equal(t, expected_sum({0, 1}, {1000}), "sum");
        const CommStats& st = c.stats();
        EXPECT_EQ(st.async_calls, 1);
        EXPECT_EQ(st.calls, 1);
        EXPECT_DOUBLE_EQ(st.bytes, 8000.0);  // 2(p-1)/p·X
        if (w.rank() == 0) {
          EXPECT_GE(st.async_in_flight_s, 0.15);  // the 200 ms loop, from just after the start
          EXPECT_LT(st.wait_s, total_s - 0.15) << "the compute time must not count as waiting";
          EXPECT_GT(st.wait_s, 0.05) << "the rest of the late peer's delay is waited";
        }
      },
      kTimeout);
}

TEST(Failures, AsyncAllReduceFailureIsNamedOnWait) {
  try {
    run_threads(
        2,
        [&](CommWorld& w) {
          at::Tensor t = at::ones({8}, at::kDouble);
          // Both ranks connect the world group first (one collective): a throw before rank 0
          // had connected failed rank 0 at "creating group" (a race seen under load in a
          // fresh-clone CI run), not on wait.
          Comm& world = w.world();
          world.barrier();
          if (w.rank() == 1) throw std::runtime_error("rank 1 gone");
          auto work = world.all_reduce_async(t);
          work->wait();
        },
        0.5);
    FAIL() << "expected RankError";
  } catch (const RankError& e) {
    ASSERT_EQ(e.failures().size(), 2u) << e.what();
    EXPECT_EQ(e.first_rank(), 1);
    EXPECT_NE(e.failures()[1].what.find("rank 0: all_reduce_async on world[0,1] failed"),
              std::string::npos)
        << e.failures()[1].what;
  }
}

TEST(Failures, ThrowingRankStopsTheOthersPromptlyAndIsNamedFirst) {
  const int threads_before = thread_count();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_threads(
        4,
        [&](CommWorld& w) {
          at::Tensor t = at::ones({8}, at::kDouble);
          w.world().all_reduce(t);
          if (w.rank() == 2) throw std::runtime_error("boom in forward");
          for (int i = 0; i < 3; ++i) w.world().all_reduce(t);
        },
        kTimeout);
    FAIL() << "expected RankError";
  } catch (const RankError& e) {
    EXPECT_EQ(e.first_rank(), 2) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 2 failed: boom in forward"), std::string::npos);
    ASSERT_EQ(e.failures().size(), 4u) << e.what();
    for (size_t i = 1; i < e.failures().size(); ++i) {
      EXPECT_NE(e.failures()[i].what.find("all_reduce on world[0,1,2,3] failed"), std::string::npos)
          << e.failures()[i].what;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, kTimeout / 2) << "peers must fail on the closed sockets, not on the timeout";
  EXPECT_EQ(thread_count(), threads_before) << "no thread left behind";
}

TEST(Failures, StalledRankMakesPeersTimeOut) {
  const int threads_before = thread_count();
  const double timeout = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_threads(
        3,
        [&](CommWorld& w) {
          at::Tensor t = at::ones({8}, at::kDouble);
          if (w.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          w.group({0, 1, 2}).all_reduce(t);
        },
        timeout);
    FAIL() << "expected RankError";
  } catch (const RankError& e) {
    EXPECT_NE(e.first_rank(), 1) << e.what();
    EXPECT_NE(e.failures().front().what.find("all_reduce on world[0,1,2] failed"),
              std::string::npos)
        << e.what();
    EXPECT_LT(e.failures().front().at_s, 1.4) << "the timeout, not the stall, ends the wait";
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
  EXPECT_EQ(thread_count(), threads_before) << "no thread left behind";
}

// A rank that cannot create its Gloo device (here: an address that is not this host's, from
// the documentation range of RFC 5737) is named by its peers at once; they used to wait out
// the whole timeout_s in the world group's rendezvous.
TEST(Failures, ARankWithoutAGlooDeviceIsNamedByItsPeersAtOnce) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const double timeout = 60;
  std::string err0, err1;
  auto rank = [&](int r, const char* host, std::string& err) {
    GlooOptions o;
    o.timeout_s = timeout;
    o.hostname = host;
    try {
      GlooCommWorld w(store, r, 2, o);
    } catch (const std::exception& e) {
      err = e.what();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread peer([&] { rank(1, "192.0.2.1", err1); });
  rank(0, "127.0.0.1", err0);
  peer.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(err1.find("rank 1: cannot create a Gloo device on '192.0.2.1'"), std::string::npos)
      << err1;
  EXPECT_NE(err0.find("rank 0: a peer cannot start (rank 1: cannot create a Gloo device"),
            std::string::npos)
      << err0;
  EXPECT_LT(s, 10.0) << "the peer must not wait out timeout_s = " << timeout << " s";
}

TEST(Launcher, RejectsBadArguments) {
  EXPECT_THROW(run_threads(
                   0, [](CommWorld&) {}, 1),
               std::invalid_argument);
  EXPECT_THROW(run_threads(
                   2, [](CommWorld&) {}, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace shardgym::live
