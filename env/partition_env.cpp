#include "env/partition_env.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "env/pipeline_action.h"
#include "env/share_action.h"
#include "runtime/core/cost.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

std::string block_name(int b) {
  return "block " + std::to_string(b) + " (layer " + std::to_string(ModelSpec::block_layer(b)) +
         " " + block_kind_name(ModelSpec::block_kind(b)) + ")";
}

// Two accumulators and kept out of line: inlined, GCC kept the running maximum in memory.
[[gnu::noinline]] double max_of(const std::vector<double>& v) {
  double a = 0, b = 0;
  const size_t n = v.size();
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    a = v[i] > a ? v[i] : a;
    b = v[i + 1] > b ? v[i + 1] : b;
  }
  if (i < n) a = v[i] > a ? v[i] : a;
  return a > b ? a : b;
}

// Denominator for an observation ratio: the reference when positive, else `fallback`, else 1.
double denominator(double ref, double fallback) {
  if (ref > 0) return ref;
  if (fallback > 0) return fallback;
  return 1.0;
}

float nonneg(double x) { return x > 0 ? static_cast<float>(x) : 0.0f; }

// The live copy with the same bytes as `v`, or `v` made the live copy (a process-wide index
// by an FNV-1a hash of the bytes, under a mutex; entries die with their last env).
std::shared_ptr<const std::vector<float>> shared_copy(std::vector<float> v) {
  const size_t bytes = v.size() * sizeof(float);
  const unsigned char* c = reinterpret_cast<const unsigned char*>(v.data());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  static std::mutex mutex;
  static std::unordered_multimap<uint64_t, std::weak_ptr<const std::vector<float>>> live;
  std::lock_guard<std::mutex> lock(mutex);
  auto range = live.equal_range(h);
  for (auto it = range.first; it != range.second;) {
    std::shared_ptr<const std::vector<float>> held = it->second.lock();
    if (!held) {
      it = live.erase(it);
      continue;
    }
    if (held->size() == v.size() && std::memcmp(held->data(), v.data(), bytes) == 0) return held;
    ++it;
  }
  auto made = std::make_shared<const std::vector<float>>(std::move(v));
  live.emplace(h, made);
  return made;
}

}  // namespace

PartitionEnv::PartitionEnv(std::string id, std::unique_ptr<TrainingRun> run,
                           const ExperimentSpec& spec)
    : run_(std::move(run)), experiment_(spec) {
  if (!run_) throw std::invalid_argument("PartitionEnv '" + id + "': null TrainingRun");
  const ModelSpec& model = run_->model();
  const StrategyCatalog& catalog = run_->catalog();
  blocks_ = model.num_blocks();
  choices_ = catalog.size();
  links_ = static_cast<int>(run_->cluster().links.size());
  world_ = std::max(1, run_->cluster().world_size());
  if (blocks_ <= 0) throw std::invalid_argument("PartitionEnv '" + id + "': model has no blocks");
  if (choices_ <= 0) throw std::invalid_argument("PartitionEnv '" + id + "': empty catalog");
  initial_plan_ =
      resolve_baseline_plan(spec.initial_plan, *run_, 1, spec.catalog.max_pipeline_stages);
  if (initial_plan_.size() != blocks_) {
    throw std::invalid_argument("PartitionEnv '" + id + "': initial plan has " +
                                std::to_string(initial_plan_.size()) + " blocks, model has " +
                                std::to_string(blocks_));
  }

  std::vector<float> features(static_cast<size_t>(choices_) * kStrategyFeatures);
  for (int k = 0; k < choices_; ++k) {
    strategy_features(catalog.at(k), k, &features[k * kStrategyFeatures]);
  }
  catalog_features_ = shared_copy(std::move(features));
  stages_ = initial_plan_.stages();
  groups_ = spec.data_share_groups;
  if (groups_ > 0 && (world_ / stages_) % groups_ != 0)
    throw std::invalid_argument(
        "PartitionEnv '" + id + "': data_shares.groups = " + std::to_string(groups_) +
        " does not split a stage's " + std::to_string(world_ / stages_) + " ranks");
  pp_moves_ = pipeline_choices(stages_);
  moves_ = plan_component_choices(stages_, groups_);
  pipeline_ = initial_plan_.pipeline;
  pending_ = initial_plan_;
  current_.assign(blocks_, -1);
  mask_.assign(static_cast<size_t>(blocks_) * choices_ + moves_, 0);
  row_epoch_.assign(blocks_, 0);
  ref_inv_.assign(static_cast<size_t>(blocks_) * 3, 1.0);
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    const std::vector<uint8_t>& shape = catalog.shape_mask(kind);
    if (static_cast<int>(shape.size()) != choices_) {
      throw std::logic_error("PartitionEnv '" + id + "': catalog shape mask of the wrong size");
    }
    shape_ok_.insert(shape_ok_.end(), shape.begin(), shape.end());
  }
  // The layout has one source, observation_parts(): the size and where observe() writes each
  // part come from it.
  const std::vector<ObservationPart> parts = observation_parts(blocks_, links_, pp_moves_, groups_);
  auto at = [&](const char* name) -> int64_t {
    const ObservationPart* p = find_part(parts, name);
    return p ? p->offset : -1;
  };
  at_global_ = at("global"), at_links_ = at("links"), at_shares_ = at("shares");
  at_pipeline_ = at("pipeline");
  const int dim = static_cast<int>(parts.back().offset + parts.back().size());
  dim_ = dim;
  last_measured_.assign(size_t(blocks_) * 3 + 2 + (pp_moves_ > 0 ? stages_ : 0), 0.0f);

  const bool deterministic = run_->deterministic();
  spec_.id = std::move(id);
  spec_.backend = run_->backend();
  spec_.description = spec_.backend + " run of " + model.name + " (" +
                      std::to_string(model.layers) + " layers) on " + run_->cluster().name + " (" +
                      std::to_string(world_) + " ranks)";
  spec_.observation_space =
      Space::box("observation", {dim}, 0.0, std::numeric_limits<double>::infinity());
  spec_.observation_space.deterministic = deterministic;
  spec_.observation_space.platform_dependent = spec_.backend == "live";
  std::vector<int64_t> nvec(blocks_, choices_);
  if (moves_ > 0) nvec.push_back(moves_);
  spec_.action_space = Space::multi_discrete("action", std::move(nvec));
  spec_.observation_parts = parts;
  spec_.num_blocks = blocks_;
  spec_.catalog_size = choices_;
  spec_.pipeline_stages = stages_;
  spec_.share_groups = groups_;
  spec_.max_episode_steps = 0;
  spec_.deterministic = deterministic;
}

void PartitionEnv::strategy_features(const Strategy& s, int index, float* out) const {
  out[0] = index >= 0 ? static_cast<float>(index) / static_cast<float>(choices_) : 1.0f;
  out[1] = static_cast<float>(s.degree()) / static_cast<float>(world_);
  const StrategyFamily& family = family_of(s);
  family.kind_features(out + 2);
  out[4] = family.sequence_parallel(s) ? 1.0f : 0.0f;
  out[5] = s.chunks > 1 ? 1.0f : 0.0f;
  out[6] = s.recompute ? 1.0f : 0.0f;
}

ResetResult PartitionEnv::reset(std::optional<uint64_t> seed) {
  const uint64_t s = seed.value_or(next_seed_);
  next_seed_ = s + 1;
  started_ = false;
  run_->reset(s, initial_plan_);
  reference_ = run_->step(initial_plan_);
  if (!reference_.ok) {
    throw std::runtime_error("PartitionEnv::reset(" + spec_.id + "): measuring the initial plan " +
                             initial_plan_.to_string() + " failed: " + reference_.error);
  }
  const size_t b = static_cast<size_t>(blocks_);
  if (reference_.block_fwd_s.size() != b || reference_.block_bwd_s.size() != b ||
      reference_.block_comm_s.size() != b) {
    throw std::logic_error("PartitionEnv::reset(" + spec_.id + "): the " + spec_.backend +
                           " run returned per-block times of the wrong size (expected " +
                           std::to_string(b) + ")");
  }
  for (size_t i = 0; i < b; ++i) {
    const double total =
        reference_.block_fwd_s[i] + reference_.block_bwd_s[i] + reference_.block_comm_s[i];
    ref_inv_[3 * i + 0] = 1.0 / denominator(reference_.block_fwd_s[i], total);
    ref_inv_[3 * i + 1] = 1.0 / denominator(reference_.block_bwd_s[i], total);
    ref_inv_[3 * i + 2] = 1.0 / denominator(reference_.block_comm_s[i], total);
  }
  steps_ = 0;
  failure_.clear();
  started_ = true;
  pending_in_force_ = false;
  sync_indices_from_plan();
  pipeline_ = run_->plan().pipeline;
  std::fill(last_measured_.begin(), last_measured_.end(), 0.0f);
  run_->context_into(ctx_);
  invalidate_mask(ctx_);
  ResetResult r;
  observe(reference_, ctx_, r.obs);
  r.info.measurement = reference_;
  r.info.plan = run_->plan();
  r.info.plan_indices = current_;
  return r;
}

void PartitionEnv::sync_indices_from_plan() {
  const Plan& plan = run_->plan();
  const StrategyCatalog& catalog = run_->catalog();
  for (int b = 0; b < blocks_; ++b) {
    current_[b] = b < plan.size() ? catalog.index_of(plan.blocks[b]) : -1;
  }
}

void PartitionEnv::require_started() const {
  if (!started_) throw std::logic_error("PartitionEnv(" + spec_.id + "): call reset() first");
}

void PartitionEnv::invalidate_mask(const RunContext& ctx) {
  ++epoch_;
  mask_phase_ = ctx.phase;
  mask_seq_factor_ = ctx.seq_factor;
  mask_capacity_ = ctx.memory_capacity;
  mask_alive_ = ctx.rank_alive;
}

std::vector<double> PartitionEnv::share_speeds(const RunContext& ctx) const {
  return share_group_speeds(groups_, run_->cluster(), stages_, ctx.rank_slowdown, ctx.rank_alive);
}

Pipeline PartitionEnv::apply_plan_choice(int c) const {
  if (c < 0 || c >= std::max(1, moves_))
    throw std::out_of_range("plan-level choice " + std::to_string(c) + " outside [0, " +
                            std::to_string(std::max(1, moves_)) + ")");
  const int offset = share_choice_offset(stages_);
  if (c < offset) return apply_pipeline_choice(pipeline_, c, blocks_ / 2);
  Pipeline out = pipeline_;
  const int g = effective_global_batch(run_->model(), world_);
  out.shares = apply_share_choice(pipeline_.shares, c - offset, groups_, g, share_speeds(ctx_));
  return out;
}

void PartitionEnv::ensure_row(int b) const {
  if (row_epoch_[b] == epoch_) return;
  // 0/1, written in place (TrainingRun::action_mask_into checks the row's size).
  run_->action_mask_into(b, mask_.data() + static_cast<size_t>(b) * choices_);
  row_epoch_[b] = epoch_;
}

void PartitionEnv::ensure_pipeline_row() const {
  if (moves_ == 0 || pipeline_epoch_ == epoch_) return;
  uint8_t* row = mask_.data() + static_cast<size_t>(blocks_) * choices_;
  row[0] = 1;  // keeping the boundaries is always allowed, as keeping a block is
  Plan trial = run_->plan();
  for (int c = 1; c < moves_; ++c) {
    if (c >= pp_moves_ && c < share_choice_offset(stages_)) {
      row[c] = 0;  // no such choice (p = 1: the component starts with the share choices)
      continue;
    }
    trial.pipeline = apply_plan_choice(c);
    bool nonempty = true;
    for (int n : trial.pipeline.layers_per_stage(blocks_ / 2)) nonempty = nonempty && n > 0;
    // Share choices: also where the blocks of the same step can move with them.
    row[c] = nonempty && (c >= share_choice_offset(stages_) ? share_choice_admissible(*run_, trial)
                                                            : plan_fits(*run_, trial))
                 ? 1
                 : 0;
  }
  pipeline_epoch_ = epoch_;
}

void PartitionEnv::action_mask_into(uint8_t* out, size_t size) const {
  require_started();
  if (size != mask_.size()) {
    throw std::logic_error("PartitionEnv(" + spec_.id + "): action mask of " +
                           std::to_string(mask_.size()) + " entries, expected " +
                           std::to_string(size));
  }
  // After a change every row is stale, and the next step needs only the rows of the blocks
  // it changes (check_action): a stale row is then written straight to `out` and left stale
  // here, which spares copying the whole mask once more. Asked twice under the same plan and
  // conditions, the rows are cached, as action_mask() caches them.
  const bool cache = direct_epoch_ == epoch_;
  direct_epoch_ = epoch_;
  if (cache)
    for (int b = 0; b < blocks_; ++b) ensure_row(b);
  const size_t k = static_cast<size_t>(choices_);
  // mask_ holds 0/1 only (TrainingRun::action_mask_into and the pipeline row write 0/1), so
  // cached rows are copied as they are, in runs of consecutive valid rows; each run of stale
  // rows is one call of the run (after a change: the whole mask in one call).
  for (int b = 0; b < blocks_;) {
    const bool cached = row_epoch_[b] == epoch_;
    int end = b + 1;
    while (end < blocks_ && (row_epoch_[end] == epoch_) == cached) ++end;
    if (cached) {
      std::memcpy(out + b * k, mask_.data() + b * k, (end - b) * k);
    } else {
      run_->action_mask_rows_into(b, end - b, out + b * k);
    }
    b = end;
  }
  ensure_pipeline_row();
  const size_t tail = static_cast<size_t>(blocks_) * k;
  if (size > tail) std::memcpy(out + tail, mask_.data() + tail, size - tail);
}

void PartitionEnv::check_action(const Action& action) const {
  const int size = blocks_ + (moves_ > 0 ? 1 : 0);
  if (static_cast<int>(action.size()) != size) {
    throw std::invalid_argument("PartitionEnv::step(" + spec_.id + "): action has " +
                                std::to_string(action.size()) + " entries, expected one per " +
                                "block (" + std::to_string(blocks_) + ")" +
                                (moves_ > 0 ? " and one for the pipeline" : ""));
  }
  if (moves_ > 0) {
    const int32_t c = action[blocks_];
    if (c < 0 || c >= moves_)
      throw std::invalid_argument("PartitionEnv::step(" + spec_.id + "): plan-level choice " +
                                  std::to_string(c) + " outside [0, " + std::to_string(moves_) +
                                  ")");
    ensure_pipeline_row();
    if (c != 0 && !mask_[static_cast<size_t>(blocks_) * choices_ + c]) {
      Plan shown;
      shown.pipeline = apply_plan_choice(c);
      throw std::invalid_argument("PartitionEnv::step(" + spec_.id + "): plan-level choice " +
                                  std::to_string(c) + " (" + shown.to_string() +
                                  ") is masked out (empties a stage, invalid or does not fit)");
    }
  }
  const StrategyCatalog& catalog = run_->catalog();
  auto reject = [&](int b, int32_t a, const std::string& why) {
    throw std::invalid_argument("PartitionEnv::step(" + spec_.id + "): " + block_name(b) +
                                ": index " + std::to_string(a) + " (" + catalog.at(a).to_string() +
                                ") " + why);
  };
  // A block kept as it is only needs a valid shape: keeping a plan in force that a scenario
  // change pushed out of memory is allowed and ends the episode at the step (out of memory),
  // as it would end the job. Changed blocks must be allowed by their mask row.
  for (int b = 0; b < blocks_; ++b) {
    const int32_t a = action[b];
    if (a < 0 || a >= choices_) {
      throw std::invalid_argument("PartitionEnv::step(" + spec_.id + "): " + block_name(b) +
                                  ": index " + std::to_string(a) + " outside [0, " +
                                  std::to_string(choices_) + ")");
    }
    if (a == current_[b]) {
      // shape_ok_: attention row then MLP row (block 2i is attention, 2i+1 MLP).
      if (!shape_ok_[static_cast<size_t>(b % 2) * choices_ + a]) reject(b, a, "is shape-invalid");
      continue;
    }
    ensure_row(b);
    if (!mask_[static_cast<size_t>(b) * choices_ + a]) {
      reject(b, a, "is masked out (invalid shape or does not fit memory)");
    }
  }
}

// Each component of a step is masked with the others as they are. A share choice that the
// blocks chosen in the same step do not admit (a degree spanning share groups, or together
// more memory than a rank has) takes those blocks narrowed by the rule the mask offered it
// under (admitted_with_shares: the widest allowed entry that divides a group; info scalar
// "blocks_narrowed"), so that one plan-level choice leaves a lost group out. Where even that
// does not fit, it is not applied: the shares in force stay, which every block the mask allowed
// admits ("plan_choice_refused").
void PartitionEnv::admit_share_choice(bool& refused, bool& narrowed) {
  const int n = static_cast<int>(pending_.pipeline.shares.size());
  if (n == 0 || pending_.pipeline.shares == pipeline_.shares) return;
  const int g = world_ / stages_ / n;
  bool spans = false;
  for (int b = 0; b < blocks_ && !spans; ++b) spans = g % pending_.blocks[b].degree() != 0;
  // The mask offered the shares with the blocks in force; blocks changed in the same step may
  // not fit them (a group's doubled batch with a block that now keeps more activations).
  if (!spans && plan_fits(*run_, pending_)) return;
  if (std::optional<Plan> admitted = admitted_with_shares(*run_, pending_)) {
    narrowed = admitted->blocks != pending_.blocks;
    pending_.blocks = std::move(admitted->blocks);
  } else {
    pending_.pipeline = pipeline_;
    refused = true;
  }
}

// A step that changes more than one component (blocks, the plan-level choice), each allowed
// with the others as they are, checked as a whole (partition_env.h): where the requested plan
// does not fit but the plan in force does, pending_ becomes the plan in force. Returns
// whether it refused. One component alone was checked exactly by its mask row.
bool PartitionEnv::refuse_joint_misfit(const Action& action) {
  int changed = moves_ > 0 && !(pending_.pipeline == pipeline_) ? 1 : 0;
  for (int b = 0; b < blocks_ && changed < 2; ++b) changed += action[b] != current_[b];
  if (changed < 2 || plan_fits(*run_, pending_) || !plan_fits(*run_, run_->plan())) return false;
  pending_ = run_->plan();
  return true;
}

// Exactly these scalars; entries of a reused r are updated in place, others erased.
void PartitionEnv::write_scalars(const Measurement& m, const Admitted& a, StepResult& r) const {
  std::map<std::string, double>& scalars = r.info.scalars;
  const bool spread = m.iterations > 1;  // several measured iterations (live.iterations)
  for (auto it = scalars.begin(); it != scalars.end();) {
    const bool ours = it->first == "raw_reward" || (spread && it->first == "step_latency_spread") ||
                      (a.plan_choice_refused && it->first == "plan_choice_refused") ||
                      (a.blocks_narrowed && it->first == "blocks_narrowed") ||
                      (a.step_refused && it->first == "step_refused");
    it = ours ? std::next(it) : scalars.erase(it);
  }
  scalars["raw_reward"] = r.reward;
  if (a.plan_choice_refused) scalars["plan_choice_refused"] = 1;
  if (a.blocks_narrowed) scalars["blocks_narrowed"] = 1;
  if (a.step_refused) scalars["step_refused"] = 1;
  if (spread) scalars["step_latency_spread"] = m.step_latency_spread;
}

void PartitionEnv::step_into(const Action& action, StepResult& r) {
  if (!failure_.empty()) {
    throw std::logic_error("PartitionEnv::step(" + spec_.id +
                           "): the episode ended with an error (" + failure_ +
                           "); call reset() first");
  }
  require_started();
  check_action(action);
  const StrategyCatalog& catalog = run_->catalog();
  // After an accepted step pending_ is the plan in force (current_): only the blocks that the
  // action changes are looked up again.
  for (int b = 0; b < blocks_; ++b)
    if (!pending_in_force_ || action[b] != current_[b]) pending_.blocks[b] = catalog.at(action[b]);
  Admitted admitted;
  if (moves_ > 0) {
    pending_.pipeline = apply_plan_choice(action[blocks_]);
    admit_share_choice(admitted.plan_choice_refused, admitted.blocks_narrowed);
  }
  admitted.step_refused = refuse_joint_misfit(action);

  // Written straight into r (reusing its buffers); every field of r is set below as a fresh
  // StepResult would have it.
  Measurement& m = r.info.measurement;
  run_->step_into(pending_, m);
  ++steps_;
  run_->context_into(ctx_);
  const RunContext& ctx = ctx_;
  bool changed = false;
  pending_in_force_ = m.ok;
  if (m.ok && (admitted.blocks_narrowed || admitted.step_refused)) {  // not the action's blocks
    sync_indices_from_plan();
    changed = true;
  } else if (m.ok) {  // an accepted step installs the requested plan
    changed = !std::equal(current_.begin(), current_.end(), action.begin());
    if (changed) std::copy_n(action.begin(), blocks_, current_.begin());
  } else {
    sync_indices_from_plan();
    changed = true;
  }
  if (moves_ > 0 && !(run_->plan().pipeline == pipeline_)) {
    pipeline_ = run_->plan().pipeline;
    changed = true;  // stage memory, so every row, depends on the boundaries
  }
  if (changed || ctx.phase != mask_phase_ || ctx.seq_factor != mask_seq_factor_ ||
      ctx.memory_capacity != mask_capacity_ || (groups_ > 0 && ctx.rank_alive != mask_alive_)) {
    invalidate_mask(ctx);
  }

  r.reward = 0;
  r.terminated = r.truncated = false;
  r.info.error.clear();
  if (m.ok) {
    const size_t b = static_cast<size_t>(blocks_);
    if (m.block_fwd_s.size() != b || m.block_bwd_s.size() != b || m.block_comm_s.size() != b) {
      throw std::logic_error("PartitionEnv::step(" + spec_.id + "): the " + spec_.backend +
                             " run returned per-block times of the wrong size (expected " +
                             std::to_string(b) + ")");
    }
    if (m.oom) {
      // The plan was installed but does not fit: no action is valid from here (every mask
      // row's entry for the plan in force says "does not fit"), so the episode ends.
      char buf[160];
      std::snprintf(buf, sizeof buf, "out of memory: peak %.2f GiB per rank > capacity %.2f GiB",
                    max_of(m.peak_memory_bytes) / double(1 << 30), capacity(ctx) / double(1 << 30));
      failure_ = buf;
      r.truncated = true;
      r.info.error = failure_;
    } else {
      r.reward = raw_reward(m, ctx);
    }
  } else {
    failure_ = m.error.empty() ? std::string("the run reported a failed step") : m.error;
    r.truncated = true;
    r.info.error = failure_;
  }
  observe(m, ctx, r.obs);
  r.info.plan_indices = current_;
  if (r.lean_info) return;  // the caller reads neither the plan nor the scalars
  write_scalars(m, admitted, r);
  r.info.plan = run_->plan();
}

double PartitionEnv::capacity(const RunContext& ctx) const {
  if (ctx.memory_capacity > 0) return ctx.memory_capacity;
  double cap = 0;
  const ClusterSpec& cluster = run_->cluster();
  for (int r = 0; r < world_; ++r) {
    const double c = cluster.device_of(r).memory_bytes;
    cap = cap == 0 ? c : std::min(cap, c);
  }
  return cap > 0 ? cap : 1.0;
}

double PartitionEnv::raw_reward(const Measurement& m, const RunContext& ctx) const {
  const RewardSpec& w = experiment_.reward;
  const double tokens = m.tokens > 0 ? m.tokens : 1.0;
  double cost = 0;
  if (w.latency != 0) cost += w.latency * (m.step_latency_s + m.repartition_s) / tokens * 1e6;
  if (w.memory != 0) cost += w.memory * max_of(m.peak_memory_bytes) / capacity(ctx);
  if (w.energy != 0) cost += w.energy * m.energy_j / tokens;
  return -cost;
}

void PartitionEnv::observe(const Measurement& m, const RunContext& ctx, Observation& obs) {
  const bool measured = m.ok && static_cast<int>(m.block_fwd_s.size()) == blocks_;
  // Every entry is written below; after a failed step the measured entries keep their
  // previous values (last_measured_), the others describe the plan and context in force.
  obs.resize(static_cast<size_t>(dim_));
  float* kept = last_measured_.data();
  const Plan& plan = run_->plan();
  for (int b = 0; b < blocks_; ++b) {
    float* out = obs.data() + static_cast<size_t>(b) * kBlockFeatures;
    const int idx = current_[b];
    if (idx >= 0) {
      // memcpy of a constant size is inlined; std::copy_n here called memmove per block.
      std::memcpy(out, catalog_features_->data() + static_cast<size_t>(idx) * kStrategyFeatures,
                  sizeof(float) * kStrategyFeatures);
    } else {
      strategy_features(plan.blocks.at(b), -1, out);
    }
    float* k = kept + 3 * static_cast<size_t>(b);
    if (measured) {
      const double* inv = &ref_inv_[3 * static_cast<size_t>(b)];
      k[0] = nonneg(m.block_fwd_s[b] * inv[0]);
      k[1] = nonneg(m.block_bwd_s[b] * inv[1]);
      k[2] = nonneg(m.block_comm_s[b] * inv[2]);
    }
    out[7] = k[0], out[8] = k[1], out[9] = k[2];
  }
  kept += 3 * static_cast<size_t>(blocks_);
  float* g = obs.data() + at_global_;
  g[0] = nonneg(static_cast<double>(steps_) / std::max(1, experiment_.steps_per_episode));
  g[1] = nonneg(static_cast<double>(ctx.phase) / std::max(1, ctx.num_phases));
  g[2] = nonneg(ctx.seq_factor);
  g[3] = nonneg(ctx.max_compute_slowdown);
  if (measured) {
    kept[0] = nonneg(max_of(m.peak_memory_bytes) / capacity(ctx));
    kept[1] = nonneg(m.step_latency_s / denominator(reference_.step_latency_s, 1.0));
  }
  g[4] = kept[0], g[5] = kept[1];
  kept += 2;
  float* links = obs.data() + at_links_;
  for (int l = 0; l < links_; ++l)
    links[l] = l < static_cast<int>(ctx.link_bw_factor.size()) ? nonneg(ctx.link_bw_factor[l]) : 1.0f;
  if (groups_ > 0) {  // per share group: share / even, speed, can train (share_action.h)
    float* sh = obs.data() + at_shares_;
    const int gb = effective_global_batch(run_->model(), world_);
    const std::vector<int> seqs =
        apportion(gb, pipeline_.shares.empty() ? std::vector<int>(groups_, 1) : pipeline_.shares);
    const std::vector<double> can = share_speeds(ctx);
    const std::vector<double> speed =
        share_group_speeds(groups_, run_->cluster(), stages_, ctx.rank_slowdown, {});
    for (int i = 0; i < groups_; ++i) {
      sh[3 * i] = nonneg(seqs[i] * double(groups_) / std::max(1, gb));
      sh[3 * i + 1] = nonneg(speed[i]);
      sh[3 * i + 2] = can[i] > 0 ? 1.0f : 0.0f;
    }
  }
  if (pp_moves_ > 0) {  // boundaries, then each stage's peak memory (pipeline_action.h)
    float* pp = obs.data() + at_pipeline_;
    const std::vector<int> per = pipeline_.layers_per_stage(blocks_ / 2);
    int first = 0;
    for (int s = 0; s + 1 < stages_; ++s) {
      first += per[s];
      pp[s] = nonneg(double(first) / (blocks_ / 2));
    }
    const size_t stage_world = static_cast<size_t>(world_ / stages_);
    if (measured) {
      const bool per_rank = m.peak_memory_bytes.size() == static_cast<size_t>(world_);
      for (int s = 0; s < stages_; ++s) {
        double peak = 0;
        for (size_t r = s * stage_world; per_rank && r < (s + 1) * stage_world; ++r)
          peak = std::max(peak, m.peak_memory_bytes[r]);
        kept[s] = per_rank ? nonneg(peak / capacity(ctx)) : 0.0f;
      }
    }
    std::copy_n(kept, stages_, pp + stages_ - 1);
  }
}

std::vector<ObservationPart> PartitionEnv::observation_parts(int blocks, int links, int moves,
                                                             int groups) {
  std::vector<ObservationPart> parts;
  int64_t offset = 0;
  auto add = [&](const char* name, std::vector<int64_t> shape, const char* meaning) {
    parts.push_back({name, offset, std::move(shape), meaning});
    offset += parts.back().size();
  };
  add("blocks", {blocks, kBlockFeatures},
      "per block: catalog index / K, degree / P, is_tp1d, is_tp2d, sp, chunks > 1, recompute, "
      "fwd, bwd and comm time / reference");
  add("global", {kGlobalFixed},
      "step / steps, phase / phases, seq_factor, max compute slowdown, peak memory / capacity, "
      "latency / initial latency");
  add("links", {links}, "measured bandwidth / nominal per link class");
  if (groups > 0) {
    add("shares", {groups, 3},
        "per data-share group: share / even share, speed (slowest rank's device peak / "
        "fastest device's / slowdown), 1 if it can train (0: a rank lost)");
  }
  if (moves > 0) {
    add("pipeline", {moves},
        "stage boundaries (first layer / layers), then each stage's peak memory / capacity");
  }
  return parts;
}

Plan PartitionEnv::plan_from_action(const Action& action) const {
  const int size = blocks_ + (moves_ > 0 ? 1 : 0);
  if (static_cast<int>(action.size()) != size) {
    throw std::invalid_argument("plan_from_action(" + spec_.id + "): action has " +
                                std::to_string(action.size()) + " entries, expected " +
                                std::to_string(size));
  }
  Plan plan;
  if (moves_ > 0) {
    if (action[blocks_] < 0 || action[blocks_] >= moves_)
      throw std::invalid_argument("plan_from_action(" + spec_.id + "): plan-level choice " +
                                  std::to_string(action[blocks_]) + " outside [0, " +
                                  std::to_string(moves_) + ")");
    plan.pipeline = apply_plan_choice(action[blocks_]);
  }
  plan.blocks.reserve(blocks_);
  for (int b = 0; b < blocks_; ++b) {
    if (action[b] < 0 || action[b] >= choices_) {
      throw std::invalid_argument("plan_from_action(" + spec_.id + "): " + block_name(b) +
                                  ": index " + std::to_string(action[b]) + " outside [0, " +
                                  std::to_string(choices_) + ")");
    }
    plan.blocks.push_back(run_->catalog().at(action[b]));
  }
  return plan;
}

Action PartitionEnv::action_from_plan(const Plan& plan) const {
  if (plan.size() != blocks_) {
    throw std::invalid_argument("action_from_plan(" + spec_.id + "): plan has " +
                                std::to_string(plan.size()) + " blocks, expected " +
                                std::to_string(blocks_));
  }
  Action action(blocks_ + (moves_ > 0 ? 1 : 0), 0);
  if (moves_ > 0) {
    int c = pipeline_choice_toward(pipeline_, plan.pipeline, blocks_ / 2);
    if (groups_ > 0 && c == 0 && plan.pipeline.shares != pipeline_.shares) {
      const int s =
          share_choice_toward(pipeline_.shares, plan.pipeline.shares, groups_,
                              effective_global_batch(run_->model(), world_), share_speeds(ctx_));
      if (s >= 0) c = share_choice_offset(stages_) + s;
    }
    if (!(apply_plan_choice(c) == plan.pipeline)) {
      Plan a, b;
      a.pipeline = plan.pipeline, b.pipeline = pipeline_;
      throw std::invalid_argument("action_from_plan(" + spec_.id + "): '" + a.to_string() +
                                  "' is not '" + b.to_string() +
                                  "' or one plan-level choice from it");
    }
    action[blocks_] = c;
  }
  for (int b = 0; b < blocks_; ++b) {
    const int idx = run_->catalog().index_of(plan.blocks[b]);
    if (idx < 0) {
      throw std::invalid_argument("action_from_plan(" + spec_.id + "): " + block_name(b) + ": " +
                                  plan.blocks[b].to_string() + " is not in the catalog");
    }
    action[b] = idx;
  }
  return action;
}

}  // namespace shardgym
