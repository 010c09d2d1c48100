#include "env/wrappers.h"

#include <algorithm>
#include <stdexcept>

namespace shardgym {
namespace {

double max_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, x);
  return m;
}

// A figure the backend leaves at 0 (e.g. no energy meter) compares as "same as baseline".
// A std::string, so that map lookups by it build no temporary key.
const std::string& baseline_key() {
  static const std::string key = "baseline_latency_per_token_s";
  return key;
}

double ratio(double baseline, double value) {
  return baseline > 0 && value > 0 ? baseline / value : 1.0;
}

// Conditions that change a noise-free estimate (RunContext without the step counter). The
// measured link bandwidth is not among them: it carries the measurement noise of every step,
// while the estimate uses the scenario's nominal bandwidth, which changes only with the phase
// (events are what change conditions). Keying on it re-estimated the baseline at every step of
// a noisy scenario (18 % of a vector env step, examples/python/vector_throughput.py).
bool same_conditions(const RunContext& a, const RunContext& b) {
  return a.phase == b.phase && a.num_phases == b.num_phases && a.seq_factor == b.seq_factor &&
         a.max_compute_slowdown == b.max_compute_slowdown &&
         a.memory_capacity == b.memory_capacity;
}

}  // namespace

// ---------------------------------------------------------------------------- TimeLimit

TimeLimit::TimeLimit(std::unique_ptr<Env> inner, int max_steps)
    : Wrapper(std::move(inner)), spec_(inner_->spec()), max_steps_(max_steps) {
  if (max_steps <= 0) {
    throw std::invalid_argument("TimeLimit(" + spec_.id + "): max_steps must be > 0, got " +
                                std::to_string(max_steps));
  }
  spec_.max_episode_steps = max_steps;
}

void TimeLimit::step_into(const Action& action, StepResult& out) {
  if (inner_->elapsed_steps() >= max_steps_) {
    throw std::logic_error("TimeLimit(" + spec_.id + "): the episode was truncated after " +
                           std::to_string(max_steps_) + " steps; call reset() first");
  }
  inner_->step_into(action, out);
  if (inner_->elapsed_steps() >= max_steps_ && !out.terminated) out.truncated = true;
}

// ---------------------------------------------------------------------- NormalizeReward

NormalizeReward::NormalizeReward(std::unique_ptr<Env> inner, RewardSpec weights, Plan baseline)
    : Wrapper(std::move(inner)), weights_(weights), baseline_(std::move(baseline)) {
  const std::string& id = inner_->spec().id;
  if (weights_.latency < 0 || weights_.memory < 0 || weights_.energy < 0 ||
      weights_.latency + weights_.memory + weights_.energy <= 0) {
    throw std::invalid_argument("NormalizeReward(" + id +
                                "): reward weights must be >= 0 with a positive sum");
  }
  if (baseline_.size() != inner_->spec().num_blocks) {
    throw std::invalid_argument("NormalizeReward(" + id + "): baseline plan has " +
                                std::to_string(baseline_.size()) + " blocks, the env " +
                                std::to_string(inner_->spec().num_blocks));
  }
}

ResetResult NormalizeReward::reset(std::optional<uint64_t> seed) {
  const uint64_t s = seed.value_or(next_seed_);
  next_seed_ = s + 1;
  ResetResult r = inner_->reset(s);
  have_key_ = false;
  estimates_ = run().estimate(baseline_).has_value();
  if (!estimates_) {
    if (r.info.plan == baseline_) {
      baseline_measured_ = r.info.measurement;  // the reference iteration is the baseline
    } else {
      run().reset(s, baseline_);
      baseline_measured_ = run().step(baseline_);
      if (!baseline_measured_.ok) {
        throw std::runtime_error("NormalizeReward(" + spec().id + "): measuring the baseline " +
                                 baseline_.to_string() + " failed: " + baseline_measured_.error);
      }
      r = inner_->reset(s);  // the episode starts from the initial plan again
    }
    const Measurement& b = baseline_measured_;
    base_.latency = b.step_latency_s / std::max(b.tokens, 1.0);
    base_.memory = max_of(b.peak_memory_bytes);
    base_.energy = b.energy_j / std::max(b.tokens, 1.0);
  }
  const Figures& base = baseline_figures();
  r.info.scalars[baseline_key()] = base.latency;
  first_step_s_ = base.latency * std::max(r.info.measurement.tokens, 1.0);
  return r;
}

const NormalizeReward::Figures& NormalizeReward::baseline_figures() {
  if (!estimates_) return base_;
  run().context_into(now_);
  if (have_key_ && same_conditions(now_, key_)) return base_;
  std::optional<Measurement> est = run().estimate(baseline_);
  // A baseline that cannot run now (e.g. out of memory after a phase change) keeps its
  // last figures; there is no "Megatron under these conditions" to compare with.
  if (est && est->ok) {
    base_.latency = est->step_latency_s / std::max(est->tokens, 1.0);
    base_.memory = max_of(est->peak_memory_bytes);
    base_.energy = est->energy_j / std::max(est->tokens, 1.0);
  }
  key_ = now_;
  have_key_ = true;
  return base_;
}

double NormalizeReward::normalize(const Measurement& m, const Figures& base) const {
  const double tokens = std::max(m.tokens, 1.0);
  double sum = 0;
  if (weights_.latency > 0) {
    const double step_s = m.step_latency_s + m.repartition_s;
    sum += weights_.latency * (weights_.latency_time_saved && first_step_s_ > 0
                                   ? 1 + (base.latency * tokens - step_s) / first_step_s_
                                   : ratio(base.latency, step_s / tokens));
  }
  if (weights_.memory > 0) sum += weights_.memory * ratio(base.memory, max_of(m.peak_memory_bytes));
  if (weights_.energy > 0) sum += weights_.energy * ratio(base.energy, m.energy_j / tokens);
  return sum / (weights_.latency + weights_.memory + weights_.energy);
}

void NormalizeReward::step_into(const Action& action, StepResult& out) {
  // The run's context and estimate describe the step about to be taken: the baseline is
  // taken before stepping, under the conditions the step will run in.
  const Figures base = baseline_figures();
  if (out.lean_info) {  // no scalars to keep up to date (StepResult::lean_info)
    inner_->step_into(action, out);
    out.reward = out.info.error.empty() ? normalize(out.info.measurement, base) : 0.0;
    return;
  }
  // The inner env leaves only its own scalars; this one's entry (node and key) is kept aside
  // and put back, so a reused `out` allocates nothing.
  auto kept = out.info.scalars.extract(baseline_key());
  inner_->step_into(action, out);
  if (!out.info.error.empty()) {
    out.reward = 0;  // a failed step has no figures to compare
    return;
  }
  out.info.scalars["raw_reward"] = out.reward;
  if (kept) {
    kept.mapped() = base.latency;
    out.info.scalars.insert(std::move(kept));
  } else {
    out.info.scalars[baseline_key()] = base.latency;
  }
  out.reward = normalize(out.info.measurement, base);
}

// -------------------------------------------------------------------------- RecordTrace

RecordTrace::RecordTrace(std::unique_ptr<Env> inner, std::shared_ptr<TraceSink> sink)
    : Wrapper(std::move(inner)), sink_(std::move(sink)) {
  if (!sink_) throw std::invalid_argument("RecordTrace(" + spec().id + "): null TraceSink");
}

RecordTrace::~RecordTrace() {
  if (!open_) return;
  try {
    sink_->end_episode();
  } catch (...) {
    // A destructor must not throw; episodes that ended earlier are already complete.
  }
}

ResetResult RecordTrace::reset(std::optional<uint64_t> seed) {
  if (open_) {
    open_ = false;
    sink_->end_episode();
  }
  const uint64_t s = seed.value_or(seed_counter_);
  seed_counter_ = s + 1;
  ResetResult r = inner_->reset(s);
  sink_->begin_episode(spec(), s, r);
  open_ = true;
  return r;
}

void RecordTrace::step_into(const Action& action, StepResult& out) {
  if (!open_) {
    throw std::logic_error("RecordTrace(" + spec().id + "): no open episode; call reset() first");
  }
  out.lean_info = false;  // the trace keeps the plan and the scalars
  inner_->step_into(action, out);
  sink_->record_step(action, out);
  if (out.terminated || out.truncated) {
    open_ = false;
    sink_->end_episode();
  }
}

}  // namespace shardgym
