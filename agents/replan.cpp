// `replan`: the re-planner an operator would run, knowing only the present.
//
// At the first step and whenever the conditions it observes change — a rank's speed or
// liveness, the sequence length, or the cost of its chosen plan under the conditions now (which
// moves with link bandwidth) — it re-solves the best plan for the conditions now: the static
// oracle's (exact chain DP, oracle.h) and, with data shares, the static optimum under each of
// share_search.h's starting share vectors for the conditions now (even, even over the groups
// that can train, balanced by speed, each group left out); with pipeline stages each
// candidate's split improved by one-layer boundary moves under the conditions now, and the
// blocks re-solved under it. It moves to the best candidate when
// the predicted saving over the rest of the episode pays for the move:
//   steady(P) · steps left + move(P)  <  steady(held) · steps left + move(held)
// where steady is the planners' cost of one iteration (objective.h) and move the repartition
// (a checkpoint restart included) that estimate() charges from the plan in force. Steps left is
// the episode's length, known in advance; nothing about when or how conditions will change is.
// The run's estimate() prices the step about to run under the conditions the observation
// shows now (the run's context is that of the step about to run): the same information as
// the observation, no more. On the simulator that is the step a condition begins on, one step
// before a live run could have measured it; every agent sees it that way.
//
// On a run that can estimate() (the simulator) it plans on that run. On one that cannot (live
// ranks) it plans on a twin: the config's own experiment on the simulator
// (shardgym/TPSim-v0: the same model, cluster — calibrated where the config names
// cluster.calibration — scenario and data-share groups, without timing noise), kept at the
// live run's step with the live run's plan in force. The twin sees the conditions the live
// observation shows (a straggler's factor, known to the env as the simulator's env knows it);
// its times are the simulator's, whose error against this machine docs/calibration.md reports.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "agents/agent_util.h"
#include "agents/baselines.h"
#include "agents/oracle.h"
#include "agents/share_search.h"
#include "env/pipeline_action.h"
#include "env/registry.h"

namespace shardgym {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kTwinEnv = "shardgym/TPSim-v0";

// What replan watches: the observable conditions, and the cost of its chosen plan under them.
struct Watched {
  std::vector<double> slowdown;
  std::vector<uint8_t> alive;
  double seq_factor = 1;
  double target_cost = kInf;
  bool operator==(const Watched& o) const {
    return slowdown == o.slowdown && alive == o.alive && seq_factor == o.seq_factor &&
           (target_cost == o.target_cost ||
            std::fabs(target_cost / o.target_cost - 1) < 1e-9);
  }
};

class ReplanAgent : public Agent {
 public:
  ReplanAgent(std::string name, const EnvSpec& spec)
      : name_(std::move(name)),
        catalog_(spec.catalog_size),
        moves_(agents_detail::pipeline_moves(spec)),
        groups_(spec.share_groups) {}
  std::string name() const override { return name_; }

  void begin_episode(Env& env) override {
    env_ = &env;
    have_target_ = false;
    twin_.reset();
    own_run_ = -1;
  }

  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& plan) override {
    if (!env_)
      throw std::logic_error(name_ + ": act() before begin_episode(env): replan plans on the "
                                     "env's run");
    TrainingRun& run = planning_run();
    const PlanObjective objective = objective_for(*env_);
    const Watched now = watch(run, objective);
    if (!have_target_ || !(now == seen_)) {
      decide(run, objective);
      seen_ = watch(run, objective);
    }
    const int blocks = static_cast<int>(target_.blocks.size());
    Action current = agents_detail::current_action(plan, blocks);
    Action wanted = plan_to_action(target_, run.catalog());
    if (moves_ > 0) wanted.push_back(agents_detail::plan_choice_toward(*env_, target_));
    return agents_detail::respect_mask(wanted, current, mask, catalog_);
  }

 private:
  // The env's run where it can estimate(), else the simulator twin (see the header), brought
  // to the live run's step and plan.
  TrainingRun& planning_run() {
    TrainingRun& run = env_->run();
    if (own_run_ < 0) own_run_ = run.estimate(run.plan()) ? 1 : 0;  // once per episode
    if (own_run_) return run;
    if (!twin_) {
      const ExperimentSpec* exp = find_experiment(*env_);
      if (!exp)
        throw std::invalid_argument(name_ + ": " + run.backend() +
                                    " run cannot estimate() and its env has no experiment "
                                    "config to build a simulator twin from");
      ExperimentSpec sim = *exp;
      sim.env_id = kTwinEnv;
      sim.scenario.noise = 0;
      sim.initial_plan = run.plan().to_string();
      twin_ = make_bare_env(kTwinEnv, sim);
      twin_->run().reset(0, run.plan());
    }
    TrainingRun& twin = twin_->run();
    const int step = run.context().step;
    while (twin.context().step < step) {
      const Measurement m = twin.step(run.plan());
      if (!m.ok) throw std::runtime_error(name_ + ": the simulator twin refused " +
                                          run.plan().to_string() + ": " + m.error);
    }
    return twin;
  }

  Watched watch(const TrainingRun& run, const PlanObjective& objective) const {
    const RunContext c = run.context();
    Watched w;
    w.slowdown = c.rank_slowdown;
    w.alive = c.rank_alive;
    w.seq_factor = c.seq_factor;
    if (have_target_) {
      const auto m = run.estimate(target_);
      w.target_cost = m ? objective.cost(*m) : kInf;
    }
    return w;
  }

  void decide(const TrainingRun& run, const PlanObjective& objective) {
    const Plan held = run.plan();
    std::vector<Plan> candidates = {held};
    OracleOptions options;
    candidates.push_back(static_oracle(run, objective, options).plan);
    if (groups_ > 0) {
      for (const std::vector<int>& shares : share_candidates(run, held, groups_)) {
        const std::unique_ptr<TrainingRun> holding = hold_shares(run, held, shares);
        if (!holding) continue;
        try {
          candidates.push_back(static_oracle(*holding, objective, options).plan);
        } catch (const std::runtime_error&) {
          // no plan fits under these shares: not a candidate
        }
      }
    }
    // Uneven stages (env/pipeline_action.h): the split of each candidate improved by one-layer
    // boundary moves while its cost under the conditions now falls, then the blocks re-solved
    // under that split.
    if (run.plan().stages() > 1) {
      const size_t n = candidates.size();
      for (size_t i = 1; i < n; ++i) {
        const Plan split = split_now(run, candidates[i], objective);
        if (split.pipeline == candidates[i].pipeline) continue;
        candidates.push_back(split);
        try {
          candidates.push_back(static_oracle(*run.clone_holding(split), objective, options).plan);
        } catch (const std::exception&) {
          // no block plan fits that split's stages: the split with its blocks stays
        }
      }
    }
    const double left = episode_steps_left(*env_);
    double best = kInf;
    for (const Plan& p : candidates) {
      const auto m = run.estimate(p);
      if (!m) continue;
      const double steady = objective.cost(*m);
      const double total = steady * left + (objective.cost(*m, /*with_repartition=*/true) - steady);
      if (total < best) {  // ties keep the earlier candidate: the plan in force first
        best = total;
        target_ = p;
      }
    }
    if (!(best < kInf)) target_ = held;
    have_target_ = true;
  }

  static Plan split_now(const TrainingRun& run, Plan plan, const PlanObjective& objective) {
    auto cost = [&](const Plan& p) {
      if (!p.validate(run.model(), run.cluster().world_size()).empty()) return kInf;
      const auto m = run.estimate(p);
      return m ? objective.cost(*m) : kInf;
    };
    double c = cost(plan);
    const int layers = run.model().layers;
    for (int round = 0; round < 4 * layers; ++round) {
      Plan best = plan;
      double best_cost = c;
      for (int k = 1; k < pipeline_choices(plan.stages()); ++k) {
        Plan q = plan;
        q.pipeline = apply_pipeline_choice(plan.pipeline, k, layers);
        if (q.pipeline == plan.pipeline) continue;
        const double v = cost(q);
        if (v < best_cost * (1 - 1e-9)) best = q, best_cost = v;
      }
      if (!(best_cost < c)) break;
      plan = best, c = best_cost;
    }
    return plan;
  }

  std::string name_;
  int catalog_, moves_, groups_;
  Env* env_ = nullptr;
  bool have_target_ = false;
  Plan target_;
  Watched seen_;
  std::unique_ptr<Env> twin_;  // planning_run()
  int own_run_ = -1;           // planning_run(): 1 the env's run estimates, 0 not, -1 unknown
};

}  // namespace

std::unique_ptr<Agent> make_replan_agent(const ParsedId& id, const EnvSpec& spec, uint64_t) {
  id.check_keys({});
  return std::make_unique<ReplanAgent>(id.to_string(), spec);
}

}  // namespace shardgym
