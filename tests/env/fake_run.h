// FakeRun: a TrainingRun with plain arithmetic costs, so env tests do not depend on the
// simulator. Deterministic for a seed; everything the env must handle can be switched on:
// noise, memory masking and out-of-memory, failing steps, no estimate (like a live run),
// scenario phases (link drops, sequence changes). Counters let tests see the calls it gets.
//
// Time as in SimRun: step() call k (0-based; k = 0 is PartitionEnv's reference iteration at
// reset, k = j is env step j) runs under every event with step ≤ k; context(), estimate() and
// action_mask() describe the step about to be taken.
//
// Length: a whole TrainingRun in one header-only test double, every switch next to the
// behaviour it turns on.
#pragma once

#include <algorithm>
#include <optional>
#include <random>
#include <stdexcept>

#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"

namespace shardgym::envtest {

struct FakeRunOptions {
  std::string backend = "sim";
  bool deterministic = true;
  bool can_estimate = true;
  double noise = 0.0;           // multiplicative: latency × (1 + noise·u), u ∈ [0, 1) seeded
  double capacity = 1e12;       // bytes per rank
  int fail_at_step = -1;        // step index k (env step k) at which step() fails (ok = false)
  bool oom_is_ok = false;       // out of memory reported like the simulator: ok, figures, oom
  double mask_capacity = 0;     // capacity the action mask assumes (0 = capacity): a memory
                                // estimate that misses, as a live run's can
};

class FakeRun : public TrainingRun {
 public:
  // Per block per rank: activations kActBytes·seq_factor (÷ degree with sp, × 0.2 with
  // recompute) + parameters kParamBytes ÷ degree.
  static constexpr double kActBytes = 1e9, kParamBytes = 2e9, kMoveBytes = 1e8;

  explicit FakeRun(const ExperimentSpec& spec, FakeRunOptions options = {})
      : spec_(spec), options_(options),
        catalog_(spec.model, spec.cluster.world_size(), spec.catalog) {}

  std::string backend() const override { return options_.backend; }
  const ModelSpec& model() const override { return spec_.model; }
  const ClusterSpec& cluster() const override { return spec_.cluster; }
  const StrategyCatalog& catalog() const override { return catalog_; }

  void reset(uint64_t seed, const Plan& initial) override {
    const std::string why = initial.validate(spec_.model, spec_.cluster.world_size());
    if (!why.empty()) throw std::invalid_argument("FakeRun::reset: " + why);
    rng_.seed(seed);
    plan_ = initial;
    step_ = 0;
    ++resets;
  }

  void step_into(const Plan& plan, Measurement& out) override {
    ++steps;
    Measurement m = cost(plan, /*noisy=*/true);
    if (step_ == options_.fail_at_step) {
      m.ok = false;
      m.error = "fake failure at step " + std::to_string(step_);
    }
    if (m.ok) plan_ = plan;
    ++step_;
    out = std::move(m);
  }

  const Plan& plan() const override { return plan_; }

  void context_into(RunContext& c) const override {
    c = RunContext{};
    c.step = step_;
    c.phase = spec_.scenario.phase_at(step_);
    c.num_phases = spec_.scenario.num_phases();
    c.link_bw_factor.assign(spec_.cluster.links.size(), 1.0);
    for (const ScenarioEvent& e : spec_.scenario.events) {
      if (e.step > step_) continue;
      if (e.kind == EventKind::kLinkBandwidth) {
        const int l = spec_.cluster.link_index(e.target);
        if (l >= 0) c.link_bw_factor[l] = e.factor;
      } else if (e.kind == EventKind::kSeqLength) {
        c.seq_factor = static_cast<double>(e.value) / spec_.model.seq;
      } else if (e.kind == EventKind::kStraggler) {
        c.max_compute_slowdown = std::max(c.max_compute_slowdown, e.factor);
      }
    }
    c.memory_capacity = options_.capacity;
  }

  void action_mask_rows_into(int first, int count, uint8_t* out) const override {
    write_mask_rows(first, count, out, [this](int b) { return mask_row(b); });
  }
  std::vector<uint8_t> mask_row(int block) const {
    ++mask_calls;
    const auto& shape = catalog_.shape_mask(ModelSpec::block_kind(block));
    std::vector<uint8_t> mask(shape.begin(), shape.end());
    const double seq = context().seq_factor;
    double others = 0;
    for (int b = 0; b < plan_.size(); ++b) {
      if (b != block) others += block_memory(plan_.blocks[b], seq);
    }
    for (int k = 0; k < catalog_.size(); ++k) {
      const double cap = options_.mask_capacity > 0 ? options_.mask_capacity : options_.capacity;
      if (others + block_memory(catalog_.at(k), seq) > cap) mask[k] = 0;
    }
    return mask;
  }

  std::optional<Measurement> estimate(const Plan& plan) const override {
    ++estimates;
    if (!options_.can_estimate) return std::nullopt;
    return cost(plan, /*noisy=*/false);
  }

  bool deterministic() const override { return options_.deterministic; }

  static double block_memory(const Strategy& s, double seq_factor) {
    const double t = s.degree();
    double act = kActBytes * seq_factor / (s.sp ? t : 1.0) * (s.recompute ? 0.2 : 1.0);
    return act + kParamBytes / t;
  }

  // Call counters (tests inspect them).
  int resets = 0, steps = 0;
  mutable int mask_calls = 0, estimates = 0;

 private:
  Measurement cost(const Plan& plan, bool noisy) const {
    const RunContext ctx = context();
    const int blocks = spec_.model.num_blocks();
    const int world = spec_.cluster.world_size();
    if (plan.size() != blocks) throw std::invalid_argument("FakeRun: plan of the wrong size");
    const double link = ctx.link_bw_factor.empty() ? 1.0 : ctx.link_bw_factor[0];
    Measurement m;
    m.block_fwd_s.resize(blocks);
    m.block_bwd_s.resize(blocks);
    m.block_comm_s.resize(blocks);
    double memory = 0;
    for (int b = 0; b < blocks; ++b) {
      const Strategy& s = plan.blocks[b];
      const double t = s.degree();
      const double fwd = 1e-3 * (b % 2 == 0 ? 1.0 : 2.0) / t * ctx.seq_factor *
                         ctx.max_compute_slowdown * (s.chunks > 1 ? 1.05 : 1.0);
      m.block_fwd_s[b] = fwd;
      m.block_bwd_s[b] = 2 * fwd + (s.recompute ? fwd : 0);
      const double comm = t > 1 ? 4e-4 * (t - 1) / t * (s.sp ? 0.9 : 1.0) *
                                      (s.kind == StrategyKind::kTP2D ? 0.8 : 1.0)
                                : 1e-4;
      m.block_comm_s[b] = comm / link * (s.chunks > 1 ? 0.5 : 1.0);
      memory += block_memory(s, ctx.seq_factor);
      if (!(s == plan_.blocks.at(b))) m.repartition_bytes += kMoveBytes * world;
    }
    double latency = 0;
    for (int b = 0; b < blocks; ++b) {
      latency += m.block_fwd_s[b] + m.block_bwd_s[b] + m.block_comm_s[b];
    }
    if (noisy && options_.noise > 0) {
      latency *= 1.0 + options_.noise * std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    m.step_latency_s = latency;
    m.repartition_s = m.repartition_bytes / (1e11 * link) / world;
    m.tokens = static_cast<double>(effective_global_batch_tokens());
    m.energy_j = (m.step_latency_s + m.repartition_s) * world * 300.0;
    m.peak_memory_bytes.resize(world);
    for (int r = 0; r < world; ++r) m.peak_memory_bytes[r] = memory * (1.0 - 1e-3 * r);
    if (memory > options_.capacity) {
      m.oom = true;
      if (!options_.oom_is_ok) {
        m.ok = false;
        m.error = "fake out of memory on rank 0";
      }
    }
    return m;
  }

  long effective_global_batch_tokens() const {
    const ModelSpec& m = spec_.model;
    const int world = spec_.cluster.world_size();
    return static_cast<long>(m.global_batch > 0 ? m.global_batch : m.micro_batch * world) * m.seq;
  }

  ExperimentSpec spec_;
  FakeRunOptions options_;
  StrategyCatalog catalog_;
  mutable std::mt19937_64 rng_{0};
  Plan plan_;
  int step_ = 0;  // step() calls since reset: the index of the next step
};

}  // namespace shardgym::envtest
