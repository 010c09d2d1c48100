#include "agents/oracle.h"

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "agents/agent_util.h"

namespace shardgym {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Estimates with a counter; cost and memory fraction of one plan.
class Prober {
 public:
  Prober(const TrainingRun& run, const PlanObjective& objective, int64_t* count)
      : run_(run), objective_(objective), count_(count) {}

  void probe(const Plan& plan, double& cost, double& memory) {
    std::optional<Measurement> m = run_.estimate(plan);
    if (count_) ++*count_;
    if (!m)
      throw std::runtime_error("oracle: the " + run_.backend() +
                               " run cannot estimate(); oracles need a cost model (sim)");
    if (!m->ok && !m->oom) {
      // Not valid under the conditions probed (e.g. more data-parallel replicas than a
      // batch-change event leaves sequences): infeasible there, like a plan out of memory.
      cost = memory = std::numeric_limits<double>::infinity();
      return;
    }
    cost = objective_.raw_cost(*m);
    memory = objective_.memory_fraction(*m);
  }

 private:
  const TrainingRun& run_;
  const PlanObjective& objective_;
  int64_t* count_;
};

std::vector<std::vector<int>> shape_candidates(const TrainingRun& run) {
  const StrategyCatalog& cat = run.catalog();
  const int blocks = run.model().num_blocks();
  std::vector<std::vector<int>> out(blocks);
  for (int b = 0; b < blocks; ++b) {
    const auto& mask = cat.shape_mask(ModelSpec::block_kind(b));
    for (int k = 0; k < cat.size(); ++k)
      if (mask[k]) out[b].push_back(k);
    if (out[b].empty())
      throw std::runtime_error("oracle: no catalog entry is shape-valid for block " +
                               std::to_string(b));
  }
  return out;
}

bool close(double a, double b, double scale, double rel_tol) {
  return std::abs(a - b) <= rel_tol * std::max(std::abs(scale), 1e-300);
}

}  // namespace

ChainProblem decompose_run(const TrainingRun& run, const PlanObjective& objective,
                           const Plan& reference, const OracleOptions& options,
                           int64_t* estimates) {
  const StrategyCatalog& cat = run.catalog();
  const int blocks = run.model().num_blocks();
  if (reference.size() != blocks)
    throw std::invalid_argument("oracle: reference plan has " + std::to_string(reference.size()) +
                                " blocks, the model " + std::to_string(blocks));
  Prober prober(run, objective, estimates);
  ChainProblem p;
  p.candidates = shape_candidates(run);
  std::vector<int> ref(blocks);  // catalog index of the reference entries (-1: not in catalog)
  for (int b = 0; b < blocks; ++b) ref[b] = cat.index_of(reference.blocks[b]);
  p.mem_budget = 1.0;
  prober.probe(reference, p.constant_cost, p.constant_mem);
  const double f0 = p.constant_cost, m0 = p.constant_mem;

  p.cost.resize(blocks);
  p.mem.resize(blocks);
  Plan x = reference;
  for (int b = 0; b < blocks; ++b) {
    for (int j : p.candidates[b]) {
      double c = f0, m = m0;
      if (j != ref[b]) {
        x.blocks[b] = cat.at(j);
        prober.probe(x, c, m);
      }
      p.cost[b].push_back(c - f0);
      p.mem[b].push_back(m - m0);
    }
    x.blocks[b] = reference.blocks[b];
  }

  p.pair_cost.assign(blocks, {});
  p.pair_mem.assign(blocks, {});
  auto full_pair = [&](int b) {
    const auto& ci = p.candidates[b - 1];
    const auto& cj = p.candidates[b];
    p.pair_cost[b].assign(ci.size() * cj.size(), 0.0);
    p.pair_mem[b].assign(ci.size() * cj.size(), 0.0);
    for (size_t i = 0; i < ci.size(); ++i) {
      if (ci[i] == ref[b - 1]) continue;  // a pair term with a reference side is 0
      x.blocks[b - 1] = cat.at(ci[i]);
      for (size_t j = 0; j < cj.size(); ++j) {
        if (cj[j] == ref[b]) continue;
        x.blocks[b] = cat.at(cj[j]);
        double c, m;
        prober.probe(x, c, m);
        p.pair_cost[b][i * cj.size() + j] = c - f0 - p.cost[b - 1][i] - p.cost[b][j];
        p.pair_mem[b][i * cj.size() + j] = m - m0 - p.mem[b - 1][i] - p.mem[b][j];
      }
    }
    x.blocks[b - 1] = reference.blocks[b - 1];
    x.blocks[b] = reference.blocks[b];
  };
  std::mt19937_64 rng(0x5eed);
  for (int b = 1; b < blocks; ++b) {
    // Same kinds, candidates and reference entries as the first pair of this parity: the
    // table repeats unless the run's costs depend on position. Spot-check, else compute.
    const int t = b % 2 == 1 ? 1 : 2;
    bool copy = b > 2 && p.candidates[b] == p.candidates[t] &&
                p.candidates[b - 1] == p.candidates[t - 1] && ref[b] == ref[t] &&
                ref[b - 1] == ref[t - 1];
    const auto& ci = p.candidates[b - 1];
    const auto& cj = p.candidates[b];
    for (int s = 0; copy && s < options.verify_samples; ++s) {
      const size_t i = agents_detail::uniform_int(rng, static_cast<int>(ci.size()));
      const size_t j = agents_detail::uniform_int(rng, static_cast<int>(cj.size()));
      if (ci[i] == ref[b - 1] || cj[j] == ref[b]) continue;
      x.blocks[b - 1] = cat.at(ci[i]);
      x.blocks[b] = cat.at(cj[j]);
      double c, m;
      prober.probe(x, c, m);
      const size_t k = i * cj.size() + j;
      copy =
          close(c - f0 - p.cost[b - 1][i] - p.cost[b][j], p.pair_cost[t][k], f0, options.rel_tol) &&
          close(m - m0 - p.mem[b - 1][i] - p.mem[b][j], p.pair_mem[t][k], m0, options.rel_tol);
    }
    x.blocks[b - 1] = reference.blocks[b - 1];
    x.blocks[b] = reference.blocks[b];
    if (copy) {
      p.pair_cost[b] = p.pair_cost[t];
      p.pair_mem[b] = p.pair_mem[t];
    } else {
      full_pair(b);
    }
  }
  return p;
}

Plan plan_of_entries(const StrategyCatalog& catalog, const Pipeline& pipeline,
                     const std::vector<int>& entries) {
  Plan plan;
  plan.pipeline = pipeline;
  for (int e : entries) plan.blocks.push_back(catalog.at(e));
  return plan;
}

OracleResult static_oracle(const TrainingRun& run, const PlanObjective& objective,
                           const OracleOptions& options) {
  const StrategyCatalog& cat = run.catalog();
  const int blocks = run.model().num_blocks();
  OracleResult result;
  Prober prober(run, objective, &result.estimates);
  // The plan in force is the reference when the catalog holds it, else the first
  // shape-valid entry of each block.
  Plan reference = run.plan();
  const auto candidates = shape_candidates(run);
  for (int b = 0; b < blocks; ++b)
    if (cat.index_of(reference.blocks[b]) < 0) reference.blocks[b] = cat.at(candidates[b][0]);
  ChainProblem problem = decompose_run(run, objective, reference, options, &result.estimates);

  double best = kInf;
  // Rounding can put a plan at the capacity boundary just over it: shrink the budget a hair.
  for (double shrink : {0.0, 1e-9, 1e-6, 1e-3}) {
    problem.mem_budget = 1.0 - shrink;
    ChainSolution sol = solve_chain(problem, options.max_front);
    if (!sol.feasible) break;
    Plan plan = plan_of_entries(cat, reference.pipeline, sol.entries);
    double c, m;
    prober.probe(plan, c, m);
    if (m > 1.0) continue;
    best = c;
    result.plan = plan;
    result.predicted_cost = sol.cost;
    result.exact = sol.exact && close(c, sol.cost, c, options.rel_tol);
    result.chosen_by = "dp";
    break;
  }
  // Safety net: the reference and every uniform plan that fits.
  std::vector<Plan> others = {reference};
  for (int k = 0; k < cat.size(); ++k) {
    if (!cat.why_invalid(BlockKind::kAttention, k).empty()) continue;
    if (!cat.why_invalid(BlockKind::kMlp, k).empty()) continue;
    others.push_back(Plan::uniform(cat.at(k), blocks));
    others.back().pipeline = reference.pipeline;
  }
  for (size_t i = 0; i < others.size(); ++i) {
    double c, m;
    prober.probe(others[i], c, m);
    if (m <= 1.0 && c < best * (1 - options.rel_tol)) {
      best = c;
      result.plan = others[i];
      result.chosen_by = i == 0 ? "reference" : "uniform";
      result.exact = false;
    }
  }
  if (!std::isfinite(best))
    throw std::runtime_error("oracle: no plan fits memory on " + run.cluster().name);
  result.cost = best;
  result.action.resize(blocks);
  for (int b = 0; b < blocks; ++b) result.action[b] = cat.index_of(result.plan.blocks[b]);
  return result;
}

}  // namespace shardgym
