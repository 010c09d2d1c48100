// Shared by the data-share tests on live ranks (shares_test.cpp, exclusion_test.cpp): their
// model, the cases whose batch arithmetic fits a share vector, and the checks of both.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/data_shares.h"
#include "runtime/live/tp/micro_batches.h"
#include "tests/live/model/equivalence_util.h"

namespace shardgym::live::testing {

// tiny_model with G = 16: room for uneven groups, excluded groups and 2 micro-batches.
inline ModelSpec shares_model() {
  ModelSpec m = tiny_model();
  m.global_batch = 16;
  m.micro_batch = 16;
  return m;
}

// Whether `plan` with `weights` runs m micro-batches of a G-row batch on `world` ranks, from the
// batch arithmetic (not the runtime's check, so that a check refusing too much would show as
// missing cases): every degree divides a group's g = P/n ranks, and each training group's rows
// split over its ranks and then into m, and each replica's rows per micro-batch into the
// block's chunks. An excluded group (weight 0) trains no rows.
inline bool fits_shares(const Plan& plan, const std::vector<int>& weights, int world, int G,
                        int m) {
  const int n = static_cast<int>(weights.size()), g = world / n;
  const std::vector<int> rows = apportion(G, weights);
  for (int i = 0; i < n; ++i) {
    for (const Strategy& s : plan.blocks)
      if (g % s.degree() != 0) return false;
    if (weights[i] == 0) continue;
    if (rows[i] == 0 || rows[i] % g != 0 || (rows[i] / g) % m != 0) return false;
    for (const Strategy& s : plan.blocks)
      if ((rows[i] / (g / s.degree()) / m) % s.chunks != 0) return false;
  }
  return true;
}

// Every uniform catalog strategy, 12 random mixtures (from `seed`) and the degenerate meshes,
// those that fit `weights` and m, with the shares and m micro-batches.
inline std::vector<Case> share_cases(const ModelSpec& model, int world,
                                     const std::vector<int>& weights, int m, uint32_t seed) {
  std::vector<Case> all = uniform_cases(model, world);
  for (const Case& c : mixture_cases(model, world, 12, seed)) all.push_back(c);
  for (const Case& c : degenerate_mesh_cases(model, world)) all.push_back(c);
  std::vector<Case> out;
  for (Case c : all) {
    if (!fits_shares(c.plan, weights, world, static_cast<int>(model.global_batch), m)) continue;
    c.plan.pipeline.shares = weights;
    c.name += " @dp(" + shares_to_string(weights) + ") m=" + std::to_string(m);
    c.micro_batches = m;
    out.push_back(c);
  }
  return out;
}

// Share groups of g ≥ 2 ranks leave tensor parallelism inside them: with g = 2 every kind with
// degree 2 (no 2D mesh of 2 × 2), with g = 4 the 2D meshes too.
inline void expect_kinds_of_groups(const std::vector<Case>& cases, int world, int groups) {
  const int g = world / groups;
  std::set<std::string> expected = {"dp", "chunks", "recompute"};
  if (g >= 2) expected.insert({"tp1d", "sp"});
  if (g >= 4) expected.insert({"tp2d-row", "tp2d-col"});
  const std::set<std::string> got = covered_kinds(cases);
  for (const std::string& k : expected) EXPECT_TRUE(got.count(k)) << "no case uses " << k;
}

// Each plan of `moves` runs on the live ranks with one micro-batch of the whole batch.
inline void assert_moves_run_live(const ModelSpec& model, const Moves& moves, int world) {
  for (const auto& [at_iter, p] : moves)
    ASSERT_EQ(why_live_plan_invalid(model, p, world) +
                  why_micro_batches_invalid(model, p, world, model.global_batch, 1),
              "")
        << p.to_string();
}

}  // namespace shardgym::live::testing
