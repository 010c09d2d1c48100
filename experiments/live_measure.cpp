// Shared by `calibrate` and `validate-sim` on the live run (experiments/live_measure.h).
#include "experiments/live_measure.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analysis/stats.h"
#include "env/registry.h"

namespace shardgym::detail {

double spread_of(const std::vector<double>& xs) {
  const double med = median(xs);
  return med > 0 ? (quantile(xs, 0.9) - quantile(xs, 0.1)) / med : 0.0;
}

std::string failed(const Measurement& m, const Plan& plan) {
  return "the live run failed on plan " + plan.to_string() + ": " + m.error;
}

using Stepper = std::function<Measurement(const Plan&)>;

// Steps into `plan` (the repartition is measured on that first step), runs warm-up − 1 more
// unmeasured iterations, then `iterations` measured ones.
PlanStats measure(const Stepper& step, const Plan& plan, const LiveMeasureOptions& o) {
  PlanStats s;
  const Measurement first = step(plan);
  if (!first.ok) throw std::runtime_error(failed(first, plan));
  s.repartition_s = first.repartition_s;
  s.repartition_bytes = first.repartition_bytes;
  s.repartition_peak_bytes = first.repartition_peak_bytes;
  for (int i = 1; i < o.warmup; ++i) {
    const Measurement m = step(plan);
    if (!m.ok) throw std::runtime_error(failed(m, plan));
  }
  const int blocks = plan.size();
  std::vector<std::vector<double>> fwd(blocks), bwd(blocks), comm(blocks);
  std::vector<double> optimizer;
  for (int i = 0; i < o.iterations; ++i) {
    const Measurement m = step(plan);
    if (!m.ok) throw std::runtime_error(failed(m, plan));
    s.steps.push_back(m.step_latency_s);
    optimizer.push_back(m.optimizer_s);
    for (int b = 0; b < blocks; ++b) {
      fwd[b].push_back(m.block_fwd_s.at(b));
      bwd[b].push_back(m.block_bwd_s.at(b));
      comm[b].push_back(m.block_comm_s.at(b));
    }
    for (double p : m.peak_memory_bytes) s.peak_bytes = std::max(s.peak_bytes, p);
    s.rank_peak_bytes.resize(std::max(s.rank_peak_bytes.size(), m.peak_memory_bytes.size()));
    for (size_t r = 0; r < m.peak_memory_bytes.size(); ++r)
      s.rank_peak_bytes[r] = std::max(s.rank_peak_bytes[r], m.peak_memory_bytes[r]);
  }
  s.step_s = median(s.steps);
  s.spread = spread_of(s.steps);
  s.optimizer_s = median(optimizer);
  for (int b = 0; b < blocks; ++b) {
    s.fwd.push_back(median(fwd[b]));
    s.bwd.push_back(median(bwd[b]));
    s.comm.push_back(median(comm[b]));
  }
  return s;
}

LiveSetup open_live(ExperimentSpec spec, const std::string& config) {
  LiveSetup s;
  s.spec = std::move(spec);
  s.env = make_bare_env(s.spec.env_id, s.spec);
  if (s.env->run().backend() != "live")
    throw std::invalid_argument(config + ": env '" + s.spec.env_id +
                                "' is not a live run; calibration measures the live runtime "
                                "(e.g. experiments/live-quickstart.yaml)");
  return s;
}

ExperimentSpec sim_spec_of(const ExperimentSpec& live) {
  ExperimentSpec s = live;
  s.env_id = kSimEnv;
  s.scenario.noise = 0;  // the comparison is against the noise-free prediction
  return s;
}

// Random valid plans: each block a uniformly drawn shape-valid catalog entry; plans the
// simulator says do not fit memory are drawn again.
std::vector<Plan> random_plans(const StrategyCatalog& cat, int blocks, int count,
                               std::mt19937_64& rng, const SimRun& sim) {
  std::vector<Plan> plans;
  for (int i = 0; i < count; ++i) {
    for (int attempt = 0;; ++attempt) {
      if (attempt == 1000) throw std::runtime_error("no random plan fits memory after 1000 draws");
      Plan p;
      for (int b = 0; b < blocks; ++b) {
        const auto& mask = cat.shape_mask(ModelSpec::block_kind(b));
        std::vector<int> ok;
        for (int k = 0; k < cat.size(); ++k)
          if (mask[k]) ok.push_back(k);
        p.blocks.push_back(cat.at(ok[rng() % ok.size()]));
      }
      const auto est = sim.estimate(p);
      if (est && est->ok && !est->oom) {
        plans.push_back(p);
        break;
      }
    }
  }
  return plans;
}

std::vector<Plan> random_pipelined_plans(const StrategyCatalog& cat, const ModelSpec& model,
                                         int world, int count, std::mt19937_64& rng,
                                         const std::function<bool(const Plan&)>& admit) {
  std::vector<int> stage_counts;
  for (int p = 2; p <= world && p <= model.layers; ++p)
    if (world % p == 0) stage_counts.push_back(p);
  if (stage_counts.empty())
    throw std::invalid_argument("--pipelines: " + std::to_string(world) + " ranks and " +
                                std::to_string(model.layers) +
                                " layers admit no pipeline of 2 or more stages");
  const int blocks = model.num_blocks();
  std::vector<Plan> plans;
  for (int i = 0; i < count; ++i) {
    for (int attempt = 0;; ++attempt) {
      if (attempt == 1000)
        throw std::runtime_error("no random pipelined plan is valid and fits after 1000 draws");
      Plan p;
      Pipeline& pp = p.pipeline;
      pp.stages = stage_counts[rng() % stage_counts.size()];
      pp.micro_batches = 1 << (rng() % 3);
      pp.schedule = rng() % 2 ? Schedule::k1F1B : Schedule::kGPipe;
      // A random composition of the layers into p parts of at least one (p − 1 distinct cuts).
      std::vector<int> cuts;
      for (int l = 1; l < model.layers; ++l) cuts.push_back(l);
      std::shuffle(cuts.begin(), cuts.end(), rng);
      cuts.resize(pp.stages - 1);
      std::sort(cuts.begin(), cuts.end());
      cuts.push_back(model.layers);
      for (int s = 0, prev = 0; s < pp.stages; prev = cuts[s], ++s)
        pp.split.push_back(cuts[s] - prev);
      Pipeline even = pp;  // the even split is written without split=
      even.split.clear();
      if (pp.split == even.layers_per_stage(model.layers)) pp.split.clear();
      const int stage_world = world / pp.stages;
      for (int b = 0; b < blocks; ++b) {
        const auto& mask = cat.shape_mask(ModelSpec::block_kind(b));
        std::vector<int> ok;
        for (int k = 0; k < cat.size(); ++k)
          if (mask[k] && cat.at(k).degree() <= stage_world) ok.push_back(k);
        p.blocks.push_back(cat.at(ok[rng() % ok.size()]));
      }
      if (p.validate(model, world).empty() && admit(p)) {
        plans.push_back(p);
        break;
      }
    }
  }
  return plans;
}

ErrorSummary summarize(const std::vector<double>& rel) {
  ErrorSummary e;
  e.n = static_cast<int>(rel.size());
  if (rel.empty()) return e;
  e.median = median(rel);
  e.p90 = quantile(rel, 0.9);
  return e;
}

}  // namespace shardgym::detail
