// Exact dynamic programming along the block chain, the engine of the oracles.
//
// A plan's cost and memory are modelled as a constant plus one term per block plus one term
// per consecutive pair of blocks (the activation handed from block b−1 to b, the two blocks
// of a layer sharing activation memory under recomputation):
//
//   cost(x) = C + Σ_b u_b(x_b) + Σ_{b≥1} p_b(x_{b−1}, x_b)      memory(x) likewise
//   minimise cost(x) subject to memory(x) ≤ budget.
//
// Why a Pareto-front DP rather than a discretised memory dimension or a Lagrangian: the
// state is (block, candidate) and each state keeps every (cost, memory) pair that no other
// partial plan beats on both, so the constrained optimum is never thrown away — the result
// is exact, with no rounding of memory and no duality gap. To keep it fast:
//   1. the unconstrained optimum (Viterbi) is returned at once when it fits;
//   2. if the least-memory plan does not fit, nothing does;
//   3. Lagrangian relaxations (Viterbi on cost + λ·memory, bisection on λ) give a feasible
//      plan whose cost bounds the optimum from above;
//   4. labels whose cost plus the least cost-to-go exceeds that bound, or whose memory plus
//      the least memory-to-go exceeds the budget, are cut; a label with room for the most
//      memory-to-go is "safe" and only the cheapest safe label of a state survives.
// Each cut only drops labels that cannot lead to a better feasible plan, so exactness holds.
// `max_front` bounds a front anyway; a solution found after thinning says `exact = false`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace shardgym {

struct ChainProblem {
  // candidates[b]: the options of block b (catalog indices); the terms index into them.
  std::vector<std::vector<int>> candidates;
  std::vector<std::vector<double>> cost, mem;  // [b][i]
  // [b][i·n_b + j] for b ≥ 1: option i of block b−1 followed by option j of block b
  // (n_b = candidates[b].size()); [0] is empty.
  std::vector<std::vector<double>> pair_cost, pair_mem;
  double constant_cost = 0, constant_mem = 0;
  double mem_budget = std::numeric_limits<double>::infinity();

  int blocks() const { return static_cast<int>(candidates.size()); }
  // Throws std::invalid_argument if the term tables do not match the candidate lists.
  void check() const;
  // Cost and memory of a choice (indices into candidates, not catalog entries).
  double value(const std::vector<int>& choice, double* memory = nullptr) const;
};

struct ChainSolution {
  bool feasible = false;
  bool exact = true;
  std::vector<int> choice;   // index into candidates[b]
  std::vector<int> entries;  // catalog entries: candidates[b][choice[b]]
  double cost = std::numeric_limits<double>::infinity();
  double memory = 0;
  int64_t labels = 0;  // Pareto labels created (work measure)
};

ChainSolution solve_chain(const ChainProblem& problem, size_t max_front = 1 << 14);
// Enumerates every choice (tests; refuses more than `limit` choices).
ChainSolution brute_force_chain(const ChainProblem& problem, int64_t limit = 50'000'000);

}  // namespace shardgym
