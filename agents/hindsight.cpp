// The best static plan in hindsight and the phase oracle (see oracle.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "agents/oracle.h"
#include "agents/share_search.h"

namespace shardgym {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_candidates(const ChainProblem& a, const ChainProblem& b) {
  return a.candidates == b.candidates;
}

// The phases' chain problems (the same candidates around one reference) summed with their
// weights. Memory must fit in every phase: the sum's memory terms are the phases' largest,
// term by term, which bounds every phase's memory from above; `memory_exact` says whether the
// phases' terms were all equal.
ChainProblem weighted_sum(const std::vector<ChainProblem>& problems,
                          const std::vector<double>& weight, bool& memory_exact) {
  ChainProblem sum = problems[0];
  for (auto* table : {&sum.cost, &sum.pair_cost})
    for (auto& row : *table)
      for (double& v : row) v *= weight[0];
  sum.constant_cost *= weight[0];
  memory_exact = true;
  for (size_t k = 1; k < problems.size(); ++k) {
    const ChainProblem& p = problems[k];
    if (!same_candidates(sum, p))
      throw std::runtime_error("hindsight-static: the phases allow different catalog entries");
    for (size_t b = 0; b < p.cost.size(); ++b) {
      for (size_t i = 0; i < p.cost[b].size(); ++i) {
        sum.cost[b][i] += weight[k] * p.cost[b][i];
        memory_exact = memory_exact && p.mem[b][i] == sum.mem[b][i];
        sum.mem[b][i] = std::max(sum.mem[b][i], p.mem[b][i]);
      }
      for (size_t i = 0; i < p.pair_cost[b].size(); ++i) {
        sum.pair_cost[b][i] += weight[k] * p.pair_cost[b][i];
        memory_exact = memory_exact && p.pair_mem[b][i] == sum.pair_mem[b][i];
        sum.pair_mem[b][i] = std::max(sum.pair_mem[b][i], p.pair_mem[b][i]);
      }
    }
    sum.constant_cost += weight[k] * p.constant_cost;
    memory_exact = memory_exact && p.constant_mem == sum.constant_mem;
    sum.constant_mem = std::max(sum.constant_mem, p.constant_mem);
  }
  return sum;
}

// Every uniform plan valid for both block kinds, with `pipeline`.
std::vector<Plan> uniform_plans(const StrategyCatalog& cat, int blocks, const Pipeline& pipeline) {
  std::vector<Plan> out;
  for (int e = 0; e < cat.size(); ++e) {
    if (!cat.why_invalid(BlockKind::kAttention, e).empty()) continue;
    if (!cat.why_invalid(BlockKind::kMlp, e).empty()) continue;
    Plan p = Plan::uniform(cat.at(e), blocks);
    p.pipeline = pipeline;
    out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<EpisodePhase> episode_phases(const TrainingRun& run, int horizon) {
  if (!run.cloneable())
    throw std::runtime_error("the " + run.backend() + " run cannot be cloned to look ahead");
  std::vector<EpisodePhase> phases;
  std::unique_ptr<TrainingRun> walker = run.clone();
  std::unique_ptr<TrainingRun> before;
  for (int i = 0; i < horizon; ++i) {
    const int phase = walker->context().phase;
    if (phases.empty() || phase != phases.back().phase) {
      phases.push_back({i, 0, phase, std::move(before), walker->clone()});
    }
    ++phases.back().steps;
    before = walker->clone();
    walker->step(walker->plan());
  }
  return phases;
}

// The best static block plan in hindsight within the pipeline and shares in force.
static HindsightResult hindsight_blocks(const TrainingRun& run, const RewardSpec& weights,
                                        int horizon, const OracleOptions& options) {
  HindsightResult result;
  if (horizon <= 0) throw std::invalid_argument("hindsight-static: empty horizon");
  const std::vector<EpisodePhase> phases = episode_phases(run, horizon);
  const StrategyCatalog& cat = run.catalog();
  const int blocks = run.model().num_blocks();

  // Weight of a phase: its steps × its tokens per step, so that Σ weight · cost is the
  // episode's total (time, energy) rather than a mean of per-token figures: with sequence
  // lengths that change, a phase's tokens per step change too.
  std::vector<double> weight(phases.size());
  std::vector<PlanObjective> objective(phases.size());
  for (size_t k = 0; k < phases.size(); ++k) {
    objective[k] = objective_for(*phases[k].start, weights);
    const std::optional<Measurement> m = phases[k].start->estimate(run.plan());
    if (!m) throw std::runtime_error("hindsight-static: the run cannot estimate()");
    weight[k] = phases[k].steps * std::max(m->tokens, 1.0);
  }
  // The episode's cost of a plan: Σ_k weight_k · cost_k, +inf if it does not fit in some phase.
  auto total = [&](const Plan& plan) {
    double sum = 0;
    for (size_t k = 0; k < phases.size(); ++k) {
      const std::optional<Measurement> m = phases[k].start->estimate(plan);
      ++result.estimates;
      const double c = m ? objective[k].cost(*m) : kInf;
      if (!std::isfinite(c)) return kInf;
      sum += weight[k] * c;
    }
    return sum;
  };

  // One chain problem per phase around the same reference, summed with the weights
  // (weighted_sum; its memory bound is exact when one phase dominates, e.g. when the phases
  // differ in links and clocks only, as the memory model does not see those).
  Plan reference = run.plan();
  const OracleResult first = static_oracle(*phases[0].start, objective[0], options);
  result.estimates += first.estimates;
  for (int b = 0; b < blocks; ++b) {
    if (cat.index_of(reference.blocks[b]) < 0) reference.blocks[b] = first.plan.blocks[b];
  }
  std::vector<ChainProblem> problems;
  for (size_t k = 0; k < phases.size(); ++k)
    problems.push_back(
        decompose_run(*phases[k].start, objective[k], reference, options, &result.estimates));
  bool memory_exact = true;
  ChainProblem sum = weighted_sum(problems, weight, memory_exact);

  double best = kInf;
  for (double shrink : {0.0, 1e-9, 1e-6, 1e-3}) {
    sum.mem_budget = 1.0 - shrink;
    const ChainSolution sol = solve_chain(sum, options.max_front);
    if (!sol.feasible) break;
    const Plan plan = plan_of_entries(cat, reference.pipeline, sol.entries);
    const double c = total(plan);
    if (!std::isfinite(c)) continue;  // over capacity in some phase after all: shrink
    best = c;
    result.plan = plan;
    result.exact = sol.exact && memory_exact &&
                   std::abs(c - sol.cost) <= options.rel_tol * std::max(std::abs(c), 1e-300);
    result.chosen_by = "dp";
    break;
  }
  // Safety net: the plan in force, each phase's static optimum and every uniform plan.
  std::vector<std::pair<Plan, std::string>> others = {{reference, "reference"}};
  others.push_back({first.plan, "phase optimum"});
  for (size_t k = 1; k < phases.size(); ++k) {
    const OracleResult r = static_oracle(*phases[k].start, objective[k], options);
    result.estimates += r.estimates;
    others.push_back({r.plan, "phase optimum"});
  }
  for (const Plan& p : uniform_plans(cat, blocks, reference.pipeline))
    others.push_back({p, "uniform"});
  for (const auto& [plan, by] : others) {
    const double c = total(plan);
    if (c < best * (1 - options.rel_tol)) {
      best = c;
      result.plan = plan;
      result.chosen_by = by;
      result.exact = false;
    }
  }
  if (!std::isfinite(best))
    throw std::runtime_error("hindsight-static: no plan fits memory in every phase");
  result.total_cost = best;
  result.phases = static_cast<int>(phases.size());
  return result;
}

HindsightResult hindsight_static(const TrainingRun& run, const RewardSpec& weights, int horizon,
                                 const OracleOptions& options) {
  HindsightResult result = hindsight_blocks(run, weights, horizon, options);
  const bool split = options.search_split && result.plan.stages() > 1;
  if ((options.share_groups <= 0 && !split) || !run.cloneable()) return result;
  // Shares (share_search.h): the best block plan under every phase's starts, the best of
  // them improved by one-sequence moves, then the blocks re-optimised under those shares.
  // Candidates are compared by their walked episode cost.
  double best = walked_cost(run, result.plan, horizon, weights);
  Plan chosen = result.plan;
  std::string by = result.chosen_by;
  auto blocks_under = [&](const std::vector<int>& shares) {
    const std::unique_ptr<TrainingRun> held = hold_shares(run, chosen, shares);
    if (!held) return;
    try {
      const HindsightResult r = hindsight_blocks(*held, weights, horizon, options);
      result.estimates += r.estimates;
      const double c = walked_cost(run, r.plan, horizon, weights);
      if (c < best) best = c, chosen = r.plan, by = "shares+dp";
    } catch (const std::runtime_error&) {
      // No block plan fits every phase under those shares.
    }
  };
  std::vector<std::vector<int>> starts;
  for (const EpisodePhase& ph : episode_phases(run, horizon))
    for (auto& c : share_candidates(*ph.start, result.plan, options.share_groups))
      if (!c.empty() && std::find(starts.begin(), starts.end(), c) == starts.end())
        starts.push_back(c);
  for (const auto& shares : starts) blocks_under(shares);
  double searched = 0;
  if (options.share_groups > 0) {
    const Plan local =
        local_share_search(run, chosen, options.share_groups, horizon, weights, searched);
    if (searched < best && !(local.pipeline.shares == chosen.pipeline.shares)) {
      best = searched, chosen = local, by = "shares";
      blocks_under(chosen.pipeline.shares);
    }
  }
  if (split) {  // uneven stages (oracle.h): boundary moves, then the blocks under that split
    const Plan local = local_split_search(run, chosen, horizon, weights, searched);
    if (searched < best && !(local.pipeline == chosen.pipeline)) {
      best = searched, chosen = local, by = "split";
      try {
        const std::unique_ptr<TrainingRun> held = run.clone_holding(chosen);
        const HindsightResult r = hindsight_blocks(*held, weights, horizon, options);
        result.estimates += r.estimates;
        const double c = walked_cost(run, r.plan, horizon, weights);
        if (c < best) best = c, chosen = r.plan, by = "split+dp";
      } catch (const std::exception&) {
        // The blocks of the split found stay: no block plan fits every phase there.
      }
    }
  }
  result.plan = chosen;
  result.chosen_by = by;
  result.total_cost = best;
  result.exact = false;  // a search over shares and boundaries, not an exact optimum
  return result;
}

DynamicSchedule phase_oracle(const TrainingRun& run, const PlanObjective& objective, int horizon,
                             const OracleOptions& options) {
  DynamicSchedule schedule;
  if (horizon <= 0) return schedule;
  for (const EpisodePhase& p : episode_phases(run, horizon)) {
    const OracleResult r =
        static_oracle(*p.start, objective_for(*p.start, objective.weights), options);
    schedule.segments.push_back({p.first, p.steps, r.plan, r.cost});
    schedule.total_cost += p.steps * r.cost;  // steady costs; the switches' repartitions are paid
  }
  return schedule;
}

}  // namespace shardgym
