#include "agents/share_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include "env/pipeline_action.h"
#include "env/share_action.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/cost.h"

namespace shardgym {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool valid_here(const TrainingRun& run, const Plan& plan) {
  return plan.validate(run.model(), run.cluster().world_size()).empty();
}

}  // namespace

std::vector<std::vector<int>> share_candidates(const TrainingRun& run, const Plan& plan,
                                               int groups) {
  std::vector<std::vector<int>> out;
  if (groups <= 0) return out;
  const int world = run.cluster().world_size();
  const int g = effective_global_batch(run.model(), world);
  const RunContext ctx = run.context();
  const std::vector<double> speeds =
      share_group_speeds(groups, run.cluster(), plan.stages(), ctx.rank_slowdown, ctx.rank_alive);
  auto add = [&](const std::vector<int>& shares) {
    Plan p = plan;
    p.blocks.assign(plan.blocks.size(), Strategy::dp());  // the shares alone are checked here
    p.pipeline.shares = shares;
    if (!shares_invalid_reason(p, run.model(), world).empty()) return;
    if (std::find(out.begin(), out.end(), shares) == out.end()) out.push_back(shares);
  };
  add({});
  add(apply_share_choice(plan.pipeline.shares, 0, groups, g, speeds));  // even over survivors
  add(apply_share_choice(plan.pipeline.shares, 1, groups, g, speeds));  // balanced
  for (int i = 0; i < groups && groups > 1; ++i) {
    std::vector<double> without(groups, 1.0);
    for (int j = 0; j < groups; ++j) without[j] = speeds[j] > 0 && j != i ? 1.0 : 0.0;
    add(apply_share_choice({}, 1, groups, g, without));
  }
  return out;
}

std::unique_ptr<TrainingRun> hold_shares(const TrainingRun& run, const Plan& preferred,
                                         const std::vector<int>& shares) {
  Plan dp = preferred;
  dp.blocks.assign(preferred.blocks.size(), Strategy::dp());
  for (Plan p : {preferred, run.plan(), dp}) {
    p.pipeline = preferred.pipeline;
    p.pipeline.shares = shares;
    if (!valid_here(run, p)) continue;
    try {
      return run.clone_holding(p);
    } catch (const std::invalid_argument&) {
    }
  }
  return nullptr;
}

double walked_cost(const TrainingRun& run, const Plan& plan, int horizon,
                   const RewardSpec& weights) {
  std::unique_ptr<TrainingRun> walker;
  try {
    walker = run.clone_holding(plan);
  } catch (const std::invalid_argument&) {
    return kInf;
  }
  double total = 0;
  for (int i = 0; i < horizon; ++i) {
    const std::optional<Measurement> m = walker->estimate(plan);
    if (!m) throw std::runtime_error("walked_cost: the run cannot estimate()");
    const double c = objective_for(*walker, weights).cost(*m, /*with_repartition=*/true);
    if (!std::isfinite(c)) return kInf;
    total += std::max(m->tokens, 1.0) * c;
    const Measurement s = walker->step(plan);
    if (!s.ok) return kInf;
  }
  return total;
}

Plan local_share_search(const TrainingRun& run, const Plan& plan, int groups, int horizon,
                        const RewardSpec& weights, double& cost, int max_rounds) {
  Plan best = plan;
  cost = walked_cost(run, best, horizon, weights);
  if (groups < 2) return best;
  const int g = effective_global_batch(run.model(), run.cluster().world_size());
  for (int round = 0; round < max_rounds; ++round) {
    Plan round_best = best;
    double round_cost = cost;
    for (int s = 2 + groups; s < share_choices(groups); ++s) {
      Plan p = best;
      p.pipeline.shares = apply_share_choice(best.pipeline.shares, s, groups, g, {});
      if (p.pipeline.shares == best.pipeline.shares || !valid_here(run, p)) continue;
      const double c = walked_cost(run, p, horizon, weights);
      if (c < round_cost * (1 - 1e-9)) round_best = p, round_cost = c;
    }
    if (!(round_cost < cost)) break;
    best = round_best, cost = round_cost;
  }
  return best;
}

Plan local_split_search(const TrainingRun& run, const Plan& plan, int horizon,
                        const RewardSpec& weights, double& cost, int max_rounds) {
  Plan best = plan;
  cost = walked_cost(run, best, horizon, weights);
  const int stages = plan.stages(), layers = run.model().layers;
  if (stages < 2) return best;
  for (int round = 0; round < max_rounds; ++round) {
    Plan round_best = best;
    double round_cost = cost;
    for (int c = 1; c < pipeline_choices(stages); ++c) {
      Plan p = best;
      p.pipeline = apply_pipeline_choice(best.pipeline, c, layers);
      if (p.pipeline == best.pipeline || !valid_here(run, p)) continue;
      const double v = walked_cost(run, p, horizon, weights);
      if (v < round_cost * (1 - 1e-9)) round_best = p, round_cost = v;
    }
    if (!(round_cost < cost)) break;
    best = round_best, cost = round_cost;
  }
  return best;
}

}  // namespace shardgym
