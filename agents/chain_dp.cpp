#include "agents/chain_dp.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shardgym {

void ChainProblem::check() const {
  const int n = blocks();
  auto fail = [](const std::string& what) { throw std::invalid_argument("ChainProblem: " + what); };
  if (static_cast<int>(cost.size()) != n || static_cast<int>(mem.size()) != n)
    fail("cost/mem need one row per block");
  if (static_cast<int>(pair_cost.size()) != n || static_cast<int>(pair_mem.size()) != n)
    fail("pair_cost/pair_mem need one row per block (row 0 empty)");
  for (int b = 0; b < n; ++b) {
    const size_t nb = candidates[b].size();
    if (nb == 0) fail("block " + std::to_string(b) + " has no candidate");
    if (cost[b].size() != nb || mem[b].size() != nb)
      fail("block " + std::to_string(b) + ": cost/mem size differs from its candidates");
    const size_t np = b == 0 ? 0 : candidates[b - 1].size() * nb;
    if (pair_cost[b].size() != np || pair_mem[b].size() != np)
      fail("block " + std::to_string(b) + ": pair table size differs from n_{b-1}·n_b");
  }
}

double ChainProblem::value(const std::vector<int>& choice, double* memory) const {
  double c = constant_cost, m = constant_mem;
  for (int b = 0; b < blocks(); ++b) {
    const int j = choice.at(b);
    c += cost[b][j];
    m += mem[b][j];
    if (b > 0) {
      const size_t k = static_cast<size_t>(choice[b - 1]) * candidates[b].size() + j;
      c += pair_cost[b][k];
      m += pair_mem[b][k];
    }
  }
  if (memory) *memory = m;
  return c;
}

namespace {

struct Label {
  double cost, mem;
  int state;  // candidate index at this block
  int prev;   // label index at the previous block (-1 at block 0)
};

// Costs-to-go from each state, over one scalar term (cost or memory), minimised or
// maximised: togo[b][i] = best Σ over blocks b+1.. given candidate i at block b.
using Table = std::vector<std::vector<double>>;
Table to_go(const ChainProblem& p, const Table& unary, const Table& pair, bool maximise) {
  const int n = p.blocks();
  Table togo(n);
  togo[n - 1].assign(p.candidates[n - 1].size(), 0.0);
  for (int b = n - 1; b > 0; --b) {
    const size_t ni = p.candidates[b - 1].size(), nj = p.candidates[b].size();
    togo[b - 1].assign(ni, maximise ? -std::numeric_limits<double>::infinity()
                                    : std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < ni; ++i)
      for (size_t j = 0; j < nj; ++j) {
        const double v = unary[b][j] + pair[b][i * nj + j] + togo[b][j];
        togo[b - 1][i] = maximise ? std::max(togo[b - 1][i], v) : std::min(togo[b - 1][i], v);
      }
  }
  return togo;
}

// Viterbi on cost + λ·memory; returns the choice.
std::vector<int> viterbi(const ChainProblem& p, double lambda) {
  const int n = p.blocks();
  Table unary(n), pair(n);
  for (int b = 0; b < n; ++b) {
    for (size_t j = 0; j < p.cost[b].size(); ++j)
      unary[b].push_back(p.cost[b][j] + lambda * p.mem[b][j]);
    for (size_t k = 0; k < p.pair_cost[b].size(); ++k)
      pair[b].push_back(p.pair_cost[b][k] + lambda * p.pair_mem[b][k]);
  }
  const Table togo = to_go(p, unary, pair, false);
  std::vector<int> choice(n);
  double best = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < p.candidates[0].size(); ++j)
    if (unary[0][j] + togo[0][j] < best)
      best = unary[0][j] + togo[0][j], choice[0] = static_cast<int>(j);
  for (int b = 1; b < n; ++b) {
    const size_t nj = p.candidates[b].size();
    best = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < nj; ++j) {
      const double v = unary[b][j] + pair[b][choice[b - 1] * nj + j] + togo[b][j];
      if (v < best) best = v, choice[b] = static_cast<int>(j);
    }
  }
  return choice;
}

ChainSolution make_solution(const ChainProblem& p, const std::vector<int>& choice) {
  ChainSolution s;
  s.feasible = true;
  s.choice = choice;
  s.cost = p.value(choice, &s.memory);
  for (int b = 0; b < p.blocks(); ++b) s.entries.push_back(p.candidates[b][choice[b]]);
  return s;
}

// Labels of one state: the cheapest "safe" label (every completion fits) dominates every
// other safe label and every label that costs as much; the rest keep their Pareto front.
std::vector<Label> front_of(std::vector<Label> in, double safe_mem) {
  std::sort(in.begin(), in.end(), [](const Label& a, const Label& b) {
    return a.mem != b.mem ? a.mem < b.mem : a.cost < b.cost;
  });
  std::vector<Label> out;
  for (const Label& l : in)
    if (l.mem <= safe_mem && (out.empty() || l.cost < out.front().cost)) out.assign(1, l);
  for (const Label& l : in)
    if (l.mem > safe_mem && (out.empty() || l.cost < out.back().cost)) out.push_back(l);
  return out;
}

// Evenly spaced subset of a front, keeping both ends (loses exactness; reported).
std::vector<Label> thin(const std::vector<Label>& front, size_t keep) {
  std::vector<Label> out;
  for (size_t i = 0; i < keep; ++i) out.push_back(front[i * (front.size() - 1) / (keep - 1)]);
  return out;
}

}  // namespace

ChainSolution solve_chain(const ChainProblem& p, size_t max_front) {
  p.check();
  if (max_front < 2) throw std::invalid_argument("solve_chain: max_front must be >= 2");
  const int n = p.blocks();
  // 1. The unconstrained optimum, when it fits, is the answer.
  ChainSolution free = make_solution(p, viterbi(p, 0.0));
  if (free.memory <= p.mem_budget) return free;
  // 2. The least-memory plan: if it does not fit, nothing does.
  const Table mem_min = to_go(p, p.mem, p.pair_mem, false);
  const Table mem_max = to_go(p, p.mem, p.pair_mem, true);
  const Table cost_min = to_go(p, p.cost, p.pair_cost, false);
  double least = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < p.candidates[0].size(); ++j)
    least = std::min(least, p.constant_mem + p.mem[0][j] + mem_min[0][j]);
  ChainSolution sol;
  if (least > p.mem_budget) return sol;
  // 3. An upper bound from Lagrangian relaxations (bisection on λ; each a Viterbi).
  double upper = std::numeric_limits<double>::infinity();
  ChainSolution fallback;
  double lo = 0, hi = 1;
  for (int it = 0; it < 60; ++it) {
    const double lambda = it < 30 ? hi : 0.5 * (lo + hi);
    ChainSolution s = make_solution(p, viterbi(p, lambda));
    if (s.memory <= p.mem_budget && s.cost < upper) upper = s.cost, fallback = s;
    if (it < 30) {
      if (s.memory <= p.mem_budget)
        it = 29;  // bracketed: bisect from here
      else
        lo = hi, hi *= 4;
    } else if (s.memory <= p.mem_budget) {
      hi = lambda;
    } else {
      lo = lambda;
    }
  }
  // 4. Exact label-setting DP, cutting labels that cannot fit or cannot beat `upper` (the
  // bound is widened by rounding: sums in another order may differ in the last bits).
  const double bound = upper + 1e-9 * std::abs(upper);
  std::vector<std::vector<Label>> layers(n);
  auto keep = [&](const Label& l, int b) {
    return l.mem + mem_min[b][l.state] <= p.mem_budget && l.cost + cost_min[b][l.state] <= bound;
  };
  for (size_t j = 0; j < p.candidates[0].size(); ++j) {
    Label l{p.constant_cost + p.cost[0][j], p.constant_mem + p.mem[0][j], static_cast<int>(j), -1};
    if (keep(l, 0)) layers[0].push_back(l);
  }
  for (int b = 1; b < n; ++b) {
    const size_t nb = p.candidates[b].size();
    std::vector<std::vector<Label>> by_state(nb);
    const std::vector<Label>& prev = layers[b - 1];
    for (size_t li = 0; li < prev.size(); ++li) {
      const Label& l = prev[li];
      for (size_t j = 0; j < nb; ++j) {
        const size_t k = static_cast<size_t>(l.state) * nb + j;
        Label next{l.cost + p.cost[b][j] + p.pair_cost[b][k],
                   l.mem + p.mem[b][j] + p.pair_mem[b][k], static_cast<int>(j),
                   static_cast<int>(li)};
        if (keep(next, b)) by_state[j].push_back(next);
      }
    }
    for (size_t j = 0; j < nb; ++j) {
      std::vector<Label> front = front_of(std::move(by_state[j]), p.mem_budget - mem_max[b][j]);
      if (front.size() > max_front) {
        front = thin(front, max_front);
        sol.exact = false;
      }
      sol.labels += static_cast<int64_t>(front.size());
      layers[b].insert(layers[b].end(), front.begin(), front.end());
    }
  }
  int best = -1;
  for (size_t i = 0; i < layers[n - 1].size(); ++i)
    if (layers[n - 1][i].mem <= p.mem_budget &&
        (best < 0 || layers[n - 1][i].cost < layers[n - 1][best].cost))
      best = static_cast<int>(i);
  if (best < 0) {  // only rounding can cut every label: the relaxation's plan is then optimal
    if (fallback.feasible) fallback.exact = sol.exact;
    return fallback.feasible ? fallback : sol;
  }
  std::vector<int> choice(n, 0);
  for (int b = n - 1, li = best; b >= 0; --b) {
    choice[b] = layers[b][li].state;
    li = layers[b][li].prev;
  }
  const bool exact = sol.exact;
  const int64_t labels = sol.labels;
  sol = make_solution(p, choice);
  if (fallback.feasible && fallback.cost < sol.cost) sol = fallback;  // equal up to rounding
  sol.exact = exact;
  sol.labels = labels;
  return sol;
}

ChainSolution brute_force_chain(const ChainProblem& p, int64_t limit) {
  p.check();
  const int n = p.blocks();
  double total = 1;
  for (const auto& c : p.candidates) total *= static_cast<double>(c.size());
  if (total > static_cast<double>(limit))
    throw std::invalid_argument("brute_force_chain: " + std::to_string(total) +
                                " choices exceed the limit of " + std::to_string(limit));
  ChainSolution sol;
  std::vector<int> choice(n, 0);
  while (true) {
    double m = 0;
    const double c = p.value(choice, &m);
    ++sol.labels;
    if (m <= p.mem_budget && c < sol.cost) {
      sol.feasible = true;
      sol.cost = c;
      sol.memory = m;
      sol.choice = choice;
    }
    int b = n - 1;
    while (b >= 0 && ++choice[b] == static_cast<int>(p.candidates[b].size())) choice[b--] = 0;
    if (b < 0) break;
  }
  if (sol.feasible)
    for (int b = 0; b < n; ++b) sol.entries.push_back(p.candidates[b][sol.choice[b]]);
  return sol;
}

}  // namespace shardgym
