// The dynamic oracle's schedule and the two oracle agents (see oracle.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "agents/agent_util.h"
#include "agents/baselines.h"
#include "agents/oracle.h"
#include "agents/share_search.h"
#include "env/pipeline_action.h"
#include "env/share_action.h"
#include "runtime/core/cost.h"

namespace shardgym {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The dynamic oracle's search (oracle.h): candidate plans, the cost of each segment's first
// steps from every candidate in force to every other (the plans in between priced as the env
// would run them) and of each further step, then a DP over the segments.
class ScheduleSearch {
 public:
  ScheduleSearch(const TrainingRun& run, const PlanObjective& objective, int horizon,
                 const OracleOptions& options)
      : run_(run),
        objective_(objective),
        options_(options),
        groups_(options.share_groups),
        layers_(run.model().layers),
        // Walk a copy of the run to the end of the episode, cutting at every change of phase.
        segs_(episode_phases(run, horizon)) {
    collect_candidates(horizon);
    const size_t n = cand_.size();
    first_.assign(segs_.size(), std::vector<std::vector<double>>(n, std::vector<double>(n, kInf)));
    span_.assign(segs_.size(), std::vector<std::vector<int>>(n, std::vector<int>(n, 1)));
    steady_.assign(segs_.size(), std::vector<double>(n, 0.0));
    for (size_t k = 0; k < segs_.size(); ++k) price_segment(k);
  }

  DynamicSchedule solve() const;

 private:
  void add(const Plan& p) {
    if (std::find(cand_.begin(), cand_.end(), p) == cand_.end()) cand_.push_back(p);
  }
  void collect_candidates(int horizon);
  std::vector<double> group_speeds(const TrainingRun& holder, const Plan& x) const;
  int split_moves(const Plan& x, const Plan& y) const;
  bool reachable(const TrainingRun& holder, const std::vector<double>& speeds, const Plan& x,
                 const Plan& y) const;
  void share_walk(const TrainingRun& holder, const PlanObjective& obj, const Plan& x, const Plan& y,
                  int max_steps, double& cost_out, int& span_out) const;
  double boundary_walk(const TrainingRun& holder, const PlanObjective& obj, const Plan& x,
                       const Plan& y, int d) const;
  void price_segment(size_t k);
  // The objective under a segment's conditions, per step or per token as the caller's.
  PlanObjective objective_at(const TrainingRun& at) const {
    PlanObjective o = objective_for(at, objective_.weights);
    o.per_token = objective_.per_token;
    return o;
  }

  const TrainingRun& run_;
  const PlanObjective& objective_;
  const OracleOptions& options_;
  const int groups_, layers_;
  const std::vector<EpisodePhase> segs_;
  std::vector<Plan> cand_;
  // first_[k][x][y]: cost of segment k's first span_[k][x][y] steps going from x (in force) to
  // y (repartitions included): one step, or one per boundary move when y's split is d moves
  // away, or one per share choice when y's shares are several away, the plans in between
  // priced as the env would run them; steady_[k][y]: each further step of y.
  std::vector<std::vector<std::vector<double>>> first_;
  std::vector<std::vector<std::vector<int>>> span_;
  std::vector<std::vector<double>> steady_;
};

// Candidates: the plan in force and every segment's static optimum; with data shares
// (oracle.h) also each segment's optimum under its balanced shares and its even split over
// the groups that can train, and hindsight-static's plan.
void ScheduleSearch::collect_candidates(int horizon) {
  cand_ = {run_.plan()};
  for (const EpisodePhase& s : segs_) {
    const PlanObjective obj = objective_at(*s.start);
    const Plan p = static_oracle(*s.start, obj, options_).plan;
    add(p);
    if (groups_ <= 0) continue;
    const int world = run_.cluster().world_size();
    const int g = effective_global_batch(run_.model(), world);
    const RunContext ctx = s.start->context();
    const std::vector<double> speeds =
        share_group_speeds(groups_, run_.cluster(), p.stages(), ctx.rank_slowdown, ctx.rank_alive);
    for (int choice : {0, 1}) {
      const std::vector<int> shares =
          apply_share_choice(p.pipeline.shares, choice, groups_, g, speeds);
      if (shares == p.pipeline.shares) continue;
      const std::unique_ptr<TrainingRun> held = hold_shares(*s.start, p, shares);
      if (!held) continue;  // those shares admit no block plan here
      try {
        add(static_oracle(*held, obj, options_).plan);
      } catch (const std::runtime_error&) {
        // Those shares admit no plan that fits here: not a candidate.
      }
    }
  }
  if (groups_ > 0 || options_.search_split)
    add(hindsight_static(run_, objective_.weights, horizon, options_).plan);
  // The env takes one share choice per step, masked with the blocks in force or narrowed ones
  // (env/share_action.h): a plan whose shares neither admits is reached in two steps, its
  // blocks first. So that the schedule can do that ahead of an event it knows, every
  // candidate's blocks with the starting shares are candidates too.
  if (groups_ > 0) {
    const size_t before = cand_.size();
    for (size_t i = 0; i < before; ++i) {
      Plan p = cand_[i];
      p.pipeline.shares = run_.plan().pipeline.shares;
      if (plan_fits(run_, p)) add(p);
    }
  }
}

// The share groups' speeds on `holder` with x in force (the same for every y of one holder).
std::vector<double> ScheduleSearch::group_speeds(const TrainingRun& holder, const Plan& x) const {
  if (groups_ <= 0) return {};
  const RunContext ctx = holder.context();
  return share_group_speeds(groups_, holder.cluster(), x.stages(), ctx.rank_slowdown,
                            ctx.rank_alive);
}

// Boundary moves from x's split to y's (env/pipeline_action.h: one per step); 0 when the
// pipelines differ in the split alone by none, -1 when they differ in more than split and
// shares (the stage count, m or the schedule: no env step changes those).
int ScheduleSearch::split_moves(const Plan& x, const Plan& y) const {
  Pipeline a = x.pipeline, b = y.pipeline;
  a.shares.clear(), b.shares.clear();
  int d = 0;
  for (; !(a == b) && d <= 2 * layers_; ++d) {
    const int c = pipeline_choice_toward(a, b, layers_);
    if (c <= 0) return -1;
    a = apply_pipeline_choice(a, c, layers_);
  }
  return d;
}

// Whether the env can go from plan x to plan y in one step on `holder` (at that step, x in
// force): the shares by one share choice the mask allows (share_choice_admissible: with x's
// blocks, or with x's blocks narrowed to fit the share groups, y's shares fit).
bool ScheduleSearch::reachable(const TrainingRun& holder, const std::vector<double>& speeds,
                               const Plan& x, const Plan& y) const {
  if (groups_ <= 0 || x.pipeline.shares == y.pipeline.shares) return true;
  const int batch = effective_global_batch(holder.model(), holder.cluster().world_size());
  const int s = share_choice_toward(x.pipeline.shares, y.pipeline.shares, groups_, batch, speeds);
  if (s < 0) return true;  // the same sequences
  const std::vector<int> after = apply_share_choice(x.pipeline.shares, s, groups_, batch, speeds);
  if (share_choice_toward(after, y.pipeline.shares, groups_, batch, speeds) != -1) return false;
  Plan trial = x;
  trial.pipeline = y.pipeline;
  return share_choice_admissible(holder, trial);
}

// Shares several choices away (the same split): the env takes one share choice a step
// (share_action.h), so y's blocks come in with the first choice toward y's shares and each
// further step takes the next one, every plan in between priced as the env runs it, as long as
// the mask offers each choice (share_choice_admissible with the blocks in force) and the
// segment is long enough; where the blocks in force do not admit the first choice, y's blocks
// come in one step before it. Without this the oracle could not reach shares that
// hindsight-static reaches over its first steps, and fell below it (hetero-pcie-nvswitch with
// two share groups: 0.969; one group left out needs blocks that fit its doubled batch first).
// cost_out and span_out are left as they are where the walk cannot reach y.
void ScheduleSearch::share_walk(const TrainingRun& holder, const PlanObjective& obj, const Plan& x,
                                const Plan& y, int max_steps, double& cost_out,
                                int& span_out) const {
  const int batch = effective_global_batch(holder.model(), holder.cluster().world_size());
  std::unique_ptr<TrainingRun> walker = holder.clone();
  Plan in_force = x, z = y;
  z.pipeline.shares = x.pipeline.shares;
  double cost = 0;
  int steps = 0;
  while (!(z.pipeline.shares == y.pipeline.shares)) {
    if (++steps > max_steps) return;
    const std::vector<double> sp = group_speeds(*walker, in_force);
    const int c = share_choice_toward(z.pipeline.shares, y.pipeline.shares, groups_, batch, sp);
    if (c < 0) break;  // the same sequences
    Plan next = z;
    next.pipeline.shares = apply_share_choice(z.pipeline.shares, c, groups_, batch, sp);
    Plan trial = in_force;
    trial.pipeline = next.pipeline;
    if (next.pipeline.shares == z.pipeline.shares) return;
    if (!share_choice_admissible(*walker, trial)) {
      // The blocks in force do not admit the choice: y's blocks first, with the shares in
      // force (a block step, if they fit), then the choices (the env's two-step path).
      if (in_force.blocks == z.blocks || !plan_fits(*walker, z)) return;
      std::optional<Measurement> m = walker->estimate(z);
      if (!m) return;
      cost += obj.cost(*m, /*with_repartition=*/true);
      if (!walker->step(z).ok) return;
      in_force = z;
      continue;
    }
    std::optional<Measurement> m = walker->estimate(next);
    if (!m) return;
    cost += obj.cost(*m, /*with_repartition=*/true);
    if (!walker->step(next).ok) return;
    in_force = z = next;
  }
  if (steps < 1) return;
  cost_out = cost;
  span_out = steps;
}

// d boundary moves from x's split to y's, one a step, y's blocks in from the first: the cost
// of those steps (infinite where a plan on the way does not run).
double ScheduleSearch::boundary_walk(const TrainingRun& holder, const PlanObjective& obj,
                                     const Plan& x, const Plan& y, int d) const {
  std::unique_ptr<TrainingRun> walker = holder.clone();
  Plan z = y;
  z.pipeline = x.pipeline;
  double cost = 0;
  for (int i = 0; i < d && std::isfinite(cost); ++i) {
    Pipeline a = z.pipeline, b = y.pipeline;
    a.shares.clear(), b.shares.clear();
    const Pipeline next = apply_pipeline_choice(a, pipeline_choice_toward(a, b, layers_), layers_);
    z.pipeline.split = next.split;
    std::optional<Measurement> m = walker->estimate(z);
    cost += m ? obj.cost(*m, /*with_repartition=*/true) : kInf;
    if (std::isfinite(cost) && !walker->step(z).ok) cost = kInf;
  }
  return cost;
}

void ScheduleSearch::price_segment(size_t k) {
  const size_t n = cand_.size();
  const EpisodePhase& seg = segs_[k];
  const PlanObjective obj = objective_at(*seg.start);
  for (size_t x = 0; x < n; ++x) {
    std::unique_ptr<TrainingRun> holder;
    if (k == 0) {
      if (x != 0) continue;  // only the plan in force can precede the first segment
      holder = seg.start->clone();
    } else {
      holder = seg.before->clone();
      holder->step(cand_[x]);  // now at the segment's first step with x in force
    }
    const std::vector<double> speeds = group_speeds(*holder, cand_[x]);
    for (size_t y = 0; y < n; ++y) {
      const int d = split_moves(cand_[x], cand_[y]);
      if (d < 0) continue;
      const bool same_shares = cand_[x].pipeline.shares == cand_[y].pipeline.shares;
      if (d == 1 && !same_shares) continue;  // two plan-level changes: not in one env step
      if (d <= 1) {
        if (reachable(*holder, speeds, cand_[x], cand_[y])) {
          std::optional<Measurement> m = holder->estimate(cand_[y]);
          if (m) first_[k][x][y] = obj.cost(*m, /*with_repartition=*/true);
        } else if (d == 0) {
          share_walk(*holder, obj, cand_[x], cand_[y], seg.steps, first_[k][x][y], span_[k][x][y]);
        }
        continue;
      }
      // Several boundary moves: the shares must already agree (one plan-level choice a step).
      if (d > seg.steps || !same_shares) continue;
      first_[k][x][y] = boundary_walk(*holder, obj, cand_[x], cand_[y], d);
      span_[k][x][y] = d;
    }
    if (k > 0) {  // a further step of x, with x in force since the step before the segment
      std::optional<Measurement> m = holder->estimate(cand_[x]);
      steady_[k][x] = m ? obj.cost(*m) : kInf;
    }
  }
  // A plan that could not run the step before the segment (under the previous segment's
  // conditions: a batch its chunks did not divide) may still run this one: its further steps
  // are priced after its own first step here, from the walker's state at the segment's
  // start. Without this a plan valid only from this segment on looked infinitely dear and
  // was never chosen (the oracle fell below replan on a batch ramp).
  for (size_t y = 0; y < n; ++y) {
    if (seg.steps <= 1 || (k > 0 && std::isfinite(steady_[k][y]))) continue;
    std::unique_ptr<TrainingRun> c = seg.start->clone();
    c->step(cand_[y]);
    std::optional<Measurement> m = c->estimate(cand_[y]);
    steady_[k][y] = m ? obj.cost(*m) : kInf;
  }
}

// DP over segments: value[k][y] = best cost up to the end of segment k with y in force.
DynamicSchedule ScheduleSearch::solve() const {
  const size_t n = cand_.size();
  std::vector<std::vector<double>> value(segs_.size(), std::vector<double>(n, kInf));
  std::vector<std::vector<int>> from(segs_.size(), std::vector<int>(n, -1));
  for (size_t k = 0; k < segs_.size(); ++k) {
    for (size_t y = 0; y < n; ++y) {
      for (size_t x = 0; x < n; ++x) {
        const int left = segs_[k].steps - span_[k][x][y];
        const double rest = left > 0 ? left * steady_[k][y] : 0.0;
        const double prior = k == 0 ? (x == 0 ? 0.0 : kInf) : value[k - 1][x];
        const double v = prior + first_[k][x][y] + rest;
        if (v < value[k][y]) value[k][y] = v, from[k][y] = static_cast<int>(x);
      }
    }
  }
  const auto& last = value.back();
  const size_t best = std::min_element(last.begin(), last.end()) - last.begin();
  if (!std::isfinite(last[best]))
    throw std::runtime_error("dynamic-oracle: no schedule fits memory over the episode");
  DynamicSchedule schedule;
  schedule.total_cost = last[best];
  schedule.segments.resize(segs_.size());
  for (int k = static_cast<int>(segs_.size()) - 1, y = static_cast<int>(best); k >= 0; --k) {
    OracleSegment& out = schedule.segments[k];
    out.first_step = segs_[k].first;
    out.steps = segs_[k].steps;
    out.plan = cand_[y];
    out.step_cost = steady_[k][y];
    y = from[k][y];
  }
  return schedule;
}

}  // namespace

DynamicSchedule dynamic_oracle(const TrainingRun& run, const PlanObjective& objective, int horizon,
                               const OracleOptions& options) {
  if (!run.cloneable())
    throw std::runtime_error("dynamic-oracle: the " + run.backend() +
                             " run cannot be cloned to look ahead");
  if (horizon <= 0) return {};
  return ScheduleSearch(run, objective, horizon, options).solve();
}

int episode_steps_left(Env& env) {
  int limit = env.spec().max_episode_steps;
  if (limit <= 0) {
    const ExperimentSpec* exp = find_experiment(env);
    limit = exp ? exp->steps_per_episode : 0;
  }
  if (limit <= 0)
    throw std::runtime_error(
        "the env has no episode length to plan over (no time limit, no steps_per_episode)");
  return std::max(1, limit - env.elapsed_steps());
}

namespace {

// Both oracles plan lazily at the first act() of an episode (after reset: the conditions of
// the episode are known then), then follow their plan through the mask.
class OracleAgent : public Agent {
 public:
  enum class Mode { kStatic, kDynamic, kHindsight, kPhase };
  OracleAgent(std::string name, const EnvSpec& spec, Mode mode)
      : name_(std::move(name)),
        catalog_(spec.catalog_size),
        moves_(agents_detail::pipeline_moves(spec)),
        mode_(mode) {
    options_.share_groups = spec.share_groups;
    options_.search_split = spec.pipeline_stages > 1;
  }
  std::string name() const override { return name_; }
  // Whether the dynamic oracle minimises the episode's time (throughput) or its return.
  void set_episode_totals(bool totals) { episode_totals_ = totals; }

  void begin_episode(Env& env) override {
    env_ = &env;
    targets_.clear();
  }

  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& in_force) override {
    if (!env_)
      throw std::logic_error(name_ +
                             ": act() before begin_episode(env): the oracle plans on "
                             "the env's run");
    if (targets_.empty()) plan();
    const int t = env_->elapsed_steps() - start_;
    size_t k = 0;
    while (k + 1 < targets_.size() && t >= starts_[k + 1]) ++k;
    const int blocks = static_cast<int>(targets_[k].size());
    Action current = agents_detail::current_action(in_force, blocks);
    Action wanted = targets_[k];
    // The stage boundaries, then the shares, go toward the target's, one move a step.
    if (moves_ > 0) wanted.push_back(agents_detail::plan_choice_toward(*env_, plans_[k]));
    return agents_detail::respect_mask(wanted, current, mask, catalog_);
  }

 private:
  void plan() {
    TrainingRun& run = env_->run();
    PlanObjective objective = objective_for(*env_);
    if (mode_ == Mode::kDynamic) objective.per_token = !episode_totals_;
    start_ = env_->elapsed_steps();
    starts_.clear();
    plans_.clear();
    auto target = [&](const Plan& plan, int first) {
      targets_.push_back(plan_to_action(plan, run.catalog()));
      plans_.push_back(plan);
      starts_.push_back(first);
    };
    switch (mode_) {
      case Mode::kStatic:
        target(static_oracle(run, objective, options_).plan, 0);
        return;
      case Mode::kHindsight:
        target(hindsight_static(run, objective.weights, episode_steps_left(*env_), options_).plan,
               0);
        return;
      case Mode::kDynamic:
      case Mode::kPhase: {
        const int horizon = episode_steps_left(*env_);
        const DynamicSchedule schedule = mode_ == Mode::kDynamic
                                             ? dynamic_oracle(run, objective, horizon, options_)
                                             : phase_oracle(run, objective, horizon, options_);
        for (const OracleSegment& s : schedule.segments) target(s.plan, s.first_step);
      }
    }
  }

  std::string name_;
  int catalog_, moves_;
  Mode mode_;
  Env* env_ = nullptr;
  int start_ = 0;
  std::vector<Action> targets_;
  std::vector<Plan> plans_;  // the same targets as plans (their data shares)
  std::vector<int> starts_;
  OracleOptions options_;
  bool episode_totals_ = true;  // objective=time, the default
};

}  // namespace

std::unique_ptr<Agent> make_oracle_agent(const ParsedId& id, const EnvSpec& spec, uint64_t) {
  id.check_keys({});
  return std::make_unique<OracleAgent>(id.to_string(), spec, OracleAgent::Mode::kStatic);
}

bool dynamic_oracle_totals(const ParsedId& id) {
  id.check_keys({"objective"});
  const std::string o = id.get("objective", std::string("time"));
  if (o != "time" && o != "return")
    throw std::invalid_argument(id.to_string() + ": objective must be time (the episode's, "
                                "what throughput compares) or return (the env's), not " + o);
  return o == "time";
}

std::unique_ptr<Agent> make_dynamic_oracle_agent(const ParsedId& id, const EnvSpec& spec,
                                                 uint64_t) {
  auto agent = std::make_unique<OracleAgent>(id.to_string(), spec, OracleAgent::Mode::kDynamic);
  agent->set_episode_totals(dynamic_oracle_totals(id));
  return agent;
}

std::unique_ptr<Agent> make_hindsight_static_agent(const ParsedId& id, const EnvSpec& spec,
                                                   uint64_t) {
  id.check_keys({});
  return std::make_unique<OracleAgent>(id.to_string(), spec, OracleAgent::Mode::kHindsight);
}

std::unique_ptr<Agent> make_phase_oracle_agent(const ParsedId& id, const EnvSpec& spec, uint64_t) {
  id.check_keys({});
  return std::make_unique<OracleAgent>(id.to_string(), spec, OracleAgent::Mode::kPhase);
}

}  // namespace shardgym
