// Each conjugate mapping on its own, forward and backward, on groups of 2 and 4 threads-ranks:
// rank r feeds x_r and backpropagates loss_r = <y_r, w_r>; the expected gradients follow from
// the mapping's definition (mappings.h) and are computed locally from every rank's x and w.
// Also the activation redistribution and the exchange engine with real point-to-point traffic.
#include <functional>
#include <mutex>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/exchange.h"
#include "runtime/core/placement.h"
#include "runtime/live/tp/mappings.h"

namespace shardgym::live {
namespace {

constexpr double kTimeout = 60;

// Distinct per rank and exactly representable: sums and concatenations compare exactly.
at::Tensor x_of(int r) { return (at::arange(24, at::kDouble) + 100 * r).reshape({2, 4, 3}); }
at::Tensor w_of(int r) { return (at::arange(24, at::kDouble) * 3 - 7 * r).reshape({2, 4, 3}); }

using MappingFn = std::function<at::Tensor(const at::Tensor&, Comm&)>;
// Expected (y_r, dx_r) from all ranks' x and w (w shaped like the rank's output).
using Expect = std::function<std::pair<at::Tensor, at::Tensor>(
    int r, int p, const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& ws)>;

at::Tensor sum_of(const std::vector<at::Tensor>& v) {
  at::Tensor s = at::zeros_like(v[0]);
  for (const auto& t : v) s = s + t;
  return s;
}

void check_mapping(int p, const MappingFn& fn, const Expect& expect,
                   const std::function<at::Tensor(int, int)>& w_shape_of) {
  std::vector<at::Tensor> xs, ws;
  for (int r = 0; r < p; ++r) {
    xs.push_back(x_of(r));
    ws.push_back(w_shape_of(r, p));
  }
  std::mutex mu;
  std::vector<std::string> failures;
  run_threads(p, [&](CommWorld& world) {
    const int r = world.rank();
    at::Tensor x = xs[r].clone().set_requires_grad(true);
    at::Tensor y = fn(x, world.world());
    (y * ws[r]).sum().backward();
    auto [want_y, want_dx] = expect(r, p, xs, ws);
    std::lock_guard<std::mutex> lock(mu);
    if (!at::equal(y.detach(), want_y)) failures.push_back("rank " + std::to_string(r) + " forward");
    if (!at::equal(x.grad(), want_dx)) failures.push_back("rank " + std::to_string(r) + " backward");
  }, kTimeout);
  EXPECT_TRUE(failures.empty()) << (failures.empty() ? "" : failures[0]);
}

class Mappings : public ::testing::TestWithParam<int> {};

at::Tensor same_shape(int r, int) { return w_of(r); }

TEST_P(Mappings, CopyToGroupIsIdentityThenAllReduce) {
  check_mapping(GetParam(), copy_to_group,
                [](int r, int, const auto& xs, const auto& ws) { return std::make_pair(xs[r], sum_of(ws)); },
                same_shape);
}

TEST_P(Mappings, ReduceFromGroupIsAllReduceThenIdentity) {
  check_mapping(GetParam(), reduce_from_group,
                [](int r, int, const auto& xs, const auto& ws) { return std::make_pair(sum_of(xs), ws[r]); },
                same_shape);
}

TEST_P(Mappings, SumOverGroupAllReducesBothWays) {
  check_mapping(GetParam(), sum_over_group,
                [](int, int, const auto& xs, const auto& ws) { return std::make_pair(sum_of(xs), sum_of(ws)); },
                same_shape);
}

TEST_P(Mappings, ScatterKeepsOwnSliceAndAllGathersBack) {
  // dim 1 (size 4) splits into p slices.
  check_mapping(
      GetParam(), [](const at::Tensor& x, Comm& g) { return scatter_to_group(x, g, 1); },
      [](int r, int p, const auto& xs, const auto& ws) {
        return std::make_pair(xs[r].chunk(p, 1)[r], at::cat(ws, 1));
      },
      [](int r, int p) { return w_of(r).chunk(p, 1)[0].clone(); });
}

TEST_P(Mappings, GatherFromGroupAllGathersAndKeepsOwnSliceBack) {
  check_mapping(
      GetParam(), [](const at::Tensor& x, Comm& g) { return gather_from_group(x, g, 2); },
      [](int r, int p, const auto& xs, const auto& ws) {
        return std::make_pair(at::cat(xs, 2), ws[r].chunk(p, 2)[r]);
      },
      [](int r, int p) { return at::cat(std::vector<at::Tensor>(p, w_of(r)), 2) + r; });
}

TEST_P(Mappings, GatherToParallelAllGathersAndReduceScattersBack) {
  check_mapping(
      GetParam(), [](const at::Tensor& x, Comm& g) { return gather_to_parallel(x, g, 1); },
      [](int r, int p, const auto& xs, const auto& ws) {
        return std::make_pair(at::cat(xs, 1), sum_of(ws).chunk(p, 1)[r]);
      },
      [](int r, int p) { return at::cat(std::vector<at::Tensor>(p, w_of(r)), 1) * (r + 1); });
}

TEST_P(Mappings, ReduceScatterToGroupReduceScattersAndAllGathersBack) {
  check_mapping(
      GetParam(), [](const at::Tensor& x, Comm& g) { return reduce_scatter_to_group(x, g, 1); },
      [](int r, int p, const auto& xs, const auto& ws) {
        return std::make_pair(sum_of(xs).chunk(p, 1)[r], at::cat(ws, 1));
      },
      [](int r, int p) { return w_of(r).chunk(p, 1)[0].clone() - r; });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Mappings, ::testing::Values(1, 2, 4));

// Redistribution between two activation layouts of a [G, S, h] tensor: forward delivers each
// rank its new box of the full tensor; backward delivers each rank the gradient of its old box
// (taken from any holder of the new layout, which under the mapping invariant all agree).
TEST(Redistribute, MovesActivationsAndGradientsBetweenLayouts) {
  ModelSpec m = ModelSpec::gpt(/*layers=*/1, /*hidden=*/8, /*heads=*/4, /*seq=*/4);
  m.ffn = 16;
  const int p = 4, G = 8;
  const at::Tensor full = at::arange(int64_t(G) * m.seq * m.hidden, at::kDouble).reshape({G, m.seq, m.hidden});
  const at::Tensor dfull = at::sin(full);  // the gradient every holder of an element sees
  const std::vector<std::pair<std::string, std::string>> moves = {
      {"dp", "tp1d(t=2)"}, {"tp1d(t=2)", "tp1d(t=4,sp=1)"}, {"tp1d(t=4,sp=1)", "tp2d(d1=2,d2=2,first=col)"},
      {"tp2d(d1=2,d2=2,first=row)", "dp"}, {"tp1d(t=4)", "tp1d(t=4,sp=1)"}};
  for (const auto& [from_s, to_s] : moves) {
    std::mutex mu;
    std::vector<std::string> failures;
    run_threads(p, [&](CommWorld& world) {
      const int r = world.rank();
      ExchangeItem item{{G, m.seq, m.hidden}, {}, {}};
      for (int q = 0; q < p; ++q) {
        item.have.push_back(block_activation_box(m, place_block(Strategy::parse(from_s), q, p), G));
        item.want.push_back(block_activation_box(m, place_block(Strategy::parse(to_s), q, p), G));
      }
      const ExchangePlan fwd({item}, r, p);
      const ExchangePlan bwd = fwd.reversed();
      at::Tensor x = box_view(full, item.have[r]).clone().set_requires_grad(true);
      at::Tensor y = redistribute(x, fwd, bwd, world.world());
      y.backward(box_view(dfull, item.want[r]).clone());
      std::lock_guard<std::mutex> lock(mu);
      if (!at::equal(y.detach(), box_view(full, item.want[r])))
        failures.push_back(from_s + " -> " + to_s + ": forward on rank " + std::to_string(r));
      if (!at::equal(x.grad(), box_view(dfull, item.have[r])))
        failures.push_back(from_s + " -> " + to_s + ": backward on rank " + std::to_string(r));
    }, kTimeout);
    EXPECT_TRUE(failures.empty()) << failures.front();
  }
}

// The exchange engine with several items and uneven boxes: values arrive, counts match.
TEST(Exchange, MovesSeveralTensorsAtOnce) {
  const int p = 4;
  const at::Tensor a = at::arange(48, at::kDouble).reshape({6, 8});
  const at::Tensor b = at::arange(12, at::kDouble) * -1;
  std::mutex mu;
  std::vector<std::string> failures;
  run_threads(p, [&](CommWorld& world) {
    const int r = world.rank();
    ExchangeItem ia{{6, 8}, {}, {}}, ib{{12}, {}, {}};
    for (int q = 0; q < p; ++q) {
      ia.have.push_back(Box{{0, 2 * q}, {6, 2 * q + 2}});                // column slices
      ia.want.push_back(Box{{q < 2 ? 0 : 3, 0}, {q < 2 ? 3 : 6, 8}});   // row halves, twice
      ib.have.push_back(q == 3 ? Box{{0}, {12}} : Box{{4 * q}, {4 * q + 4}});
      ib.want.push_back(Box{{0}, {12}});                                 // everyone: all
    }
    const ExchangePlan plan({ia, ib}, r, p);
    auto out = plan.run(world.world(), {box_view(a, ia.have[r]).clone(), box_view(b, ib.have[r]).clone()});
    std::lock_guard<std::mutex> lock(mu);
    if (!at::equal(out[0], box_view(a, ia.want[r])) || !at::equal(out[1], b))
      failures.push_back("rank " + std::to_string(r) + " got wrong values");
    const int64_t lack = 24 - 6 + (r == 3 ? 0 : 8);
    if (plan.elements_received() != lack)
      failures.push_back("rank " + std::to_string(r) + " received " +
                         std::to_string(plan.elements_received()) + " elements");
  }, kTimeout);
  EXPECT_TRUE(failures.empty()) << failures.front();
}

}  // namespace
}  // namespace shardgym::live
