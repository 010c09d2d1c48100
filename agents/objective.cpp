#include "agents/objective.h"

#include <algorithm>
#include <limits>

#include "env/partition_env.h"
#include "env/wrappers.h"

namespace shardgym {

double PlanObjective::cost(const Measurement& m, bool with_repartition) const {
  if (!m.ok || m.oom) return std::numeric_limits<double>::infinity();
  return raw_cost(m, with_repartition);
}

double PlanObjective::raw_cost(const Measurement& m, bool with_repartition) const {
  double c = 0;
  const double tokens = m.tokens > 0 ? m.tokens : 1.0;
  const double latency = m.step_latency_s + (with_repartition ? m.repartition_s : 0.0);
  const double per = per_token ? tokens : 1.0;
  if (weights.latency != 0) c += weights.latency * latency / per * 1e6;
  if (weights.memory != 0 && memory_capacity > 0) c += weights.memory * memory_fraction(m);
  if (weights.energy != 0) c += weights.energy * m.energy_j / per;
  return c;
}

double PlanObjective::memory_fraction(const Measurement& m) const {
  if (m.peak_memory_bytes.empty() || !(memory_capacity > 0)) return 0;
  double peak = *std::max_element(m.peak_memory_bytes.begin(), m.peak_memory_bytes.end());
  return peak / memory_capacity;
}

double PlanObjective::cost_of(const TrainingRun& run, const Plan& plan) const {
  std::optional<Measurement> m = run.estimate(plan);
  if (!m) return std::numeric_limits<double>::infinity();
  return cost(*m);
}

PlanObjective objective_for(const TrainingRun& run, const RewardSpec& weights) {
  PlanObjective o;
  o.weights = weights;
  o.memory_capacity = run.context().memory_capacity;
  if (!(o.memory_capacity > 0)) {  // as PartitionEnv: the smallest device
    const ClusterSpec& c = run.cluster();
    for (int r = 0; r < c.world_size(); ++r) {
      const double m = c.device_of(r).memory_bytes;
      o.memory_capacity = o.memory_capacity > 0 ? std::min(o.memory_capacity, m) : m;
    }
  }
  return o;
}

PlanObjective objective_for(Env& env) {
  const ExperimentSpec* exp = find_experiment(env);
  RewardSpec w;
  if (exp) {
    w = exp->reward;
  } else {
    w.latency = 1;
    w.memory = w.energy = 0;
  }
  if (w.latency == 0 && w.memory == 0 && w.energy == 0) w.latency = 1;
  return objective_for(env.run(), w);
}

const ExperimentSpec* find_experiment(Env& env) {
  Env* e = &env;
  for (int depth = 0; depth < 64 && e; ++depth) {
    if (auto* p = dynamic_cast<PartitionEnv*>(e)) return &p->experiment();
    auto* w = dynamic_cast<Wrapper*>(e);
    if (!w) return nullptr;
    e = &w->inner();
  }
  return nullptr;
}

}  // namespace shardgym
