// Oracles on the run's cost model: upper bounds for the comparison tables. They need a run
// that can estimate() (the simulator) and, for the dynamic one, a cloneable run.
//
// Static oracle. The simulator's cost of a plan is a sum of per-block terms plus terms that
// join neighbouring blocks (activation redistribution; a layer's two blocks share activation
// memory under recomputation), so any plan's cost is recovered from estimate() calls around a
// reference plan r (a functional ANOVA truncated at neighbouring pairs):
//   u_b(j)     = F(r with b=j) − F(r)
//   p_b(i, j)  = F(r with b−1=i, b=j) − F(r) − u_{b−1}(i) − u_b(j)
//   F(x)       = F(r) + Σ_b u_b(x_b) + Σ_b p_b(x_{b−1}, x_b)
// which is exact when F has no interaction beyond neighbours. Pair tables repeat along the
// chain (same kinds, same layouts), so they are computed for the first attention→MLP and
// MLP→attention pairs and only spot-checked elsewhere (recomputed in full on a mismatch).
// Memory (the fullest rank's peak over capacity; every simulated rank holds the same bytes)
// is decomposed the same way and must stay ≤ 1. The chain DP (chain_dp.h) then finds the
// optimum exactly; the chosen plan is checked with one more estimate() (a plan the rounding
// put just over capacity is re-solved with a slightly smaller budget) and compared with the
// reference and the best uniform plan as a safety net. Costs are those estimate() reports
// from the plan in force: with an energy weight they include the repartition's energy.
//
// Pipelines. The static oracle keeps the pipeline in force (stages, boundaries, micro-batches)
// and optimises the blocks' strategies within it. Peak memory is then the fullest stage's, a
// maximum rather than a sum, so the decomposition is approximate and the final estimate()
// check above is what keeps the chosen plan within memory. Where the env moves boundaries
// (OracleOptions::search_split), hindsight-static also searches the split: from its block
// plan, one-layer boundary moves while the walked episode cost falls, then the blocks
// re-optimised under the split found (a local optimum, not an exact one); the dynamic oracle
// takes that plan among its candidates and reaches a split d moves away in d steps, as the
// env does, each step's plan priced.
//
// Data shares (agents/share_search.h). With OracleOptions::share_groups > 0 the dynamic oracle
// adds, per segment, the static optimum under the segment's balanced shares and under the even
// split over the groups that can train, and hindsight-static's plan (so that it can always keep
// that one plan: never below hindsight-static, up to the estimates' exactness); hindsight-static
// searches share vectors as share_search.h says, costing each candidate by walking the episode
// (checkpoint restarts of plans that need a lost rank included).
//
// Dynamic oracle. Knows the future: walks a clone of the run to the end of the episode,
// splits it into segments of constant conditions (scenario phases), solves the static oracle
// in each, then picks per segment one plan among those optima and the plan in force by a
// small DP whose transition cost is the repartition the env would charge (measured with
// estimate() on clones that hold the previous plan).
//
// Length: each oracle's guarantee (what it bounds, and when it is exact) is stated here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agents/agent.h"
#include "agents/chain_dp.h"
#include "agents/objective.h"

namespace shardgym {

struct OracleOptions {
  size_t max_front = 1 << 14;  // chain_dp.h
  int verify_samples = 24;     // spot checks per repeated pair table
  // Relative tolerance of the spot checks and of "the decomposition predicted the estimate":
  // sums of the same terms in a different order differ by rounding only.
  double rel_tol = 1e-7;
  // Data-share groups to search (agents/share_search.h; the env's `data_shares.groups`);
  // 0: keep the shares in force, as before data shares.
  int share_groups = 0;
  // Whether the env moves stage boundaries (env/pipeline_action.h: p > 1 stages): then
  // hindsight-static also searches the split (share_search.h local_split_search) and the
  // dynamic oracle reaches its plan one boundary move per step.
  bool search_split = false;
};

struct OracleResult {
  Plan plan;
  Action action;
  double cost = 0;            // estimate() of `plan`, costed (PlanObjective)
  double predicted_cost = 0;  // what the chain decomposition predicted for the DP's plan
  bool exact = true;          // DP exact and decomposition matched the estimate
  std::string chosen_by;      // "dp", "reference" or "uniform" (safety net)
  int64_t estimates = 0;      // estimate() calls spent
};

// The chain problem of `run` under its current conditions, around `reference` (a valid plan),
// over each block's shape-valid catalog entries. Throws std::runtime_error if the run cannot
// estimate.
ChainProblem decompose_run(const TrainingRun& run, const PlanObjective& objective,
                           const Plan& reference, const OracleOptions& options,
                           int64_t* estimates = nullptr);

// The plan of catalog `entries` (one per block) within `pipeline`: the oracles keep the
// pipeline in force (stages, boundaries, micro-batches).
Plan plan_of_entries(const StrategyCatalog& catalog, const Pipeline& pipeline,
                     const std::vector<int>& entries);

// Throws std::runtime_error if the run cannot estimate or no plan fits.
OracleResult static_oracle(const TrainingRun& run, const PlanObjective& objective,
                           const OracleOptions& options = {});

// A segment of the episode with constant conditions and the plan the dynamic oracle runs.
struct OracleSegment {
  int first_step = 0;  // index of the first env step of the segment, from the planning moment
  int steps = 0;
  Plan plan;
  double step_cost = 0;  // steady cost per step of `plan` in this segment
};

struct DynamicSchedule {
  std::vector<OracleSegment> segments;
  double total_cost = 0;  // Σ steady costs + transitions (PlanObjective units)
};

// `horizon`: env steps left in the episode. With objective.per_token false the schedule
// minimises the sum of its steps' whole costs: the episode's time, i.e. the most tokens a
// second, what the suite and the agents' tables compare and what hindsight-static minimises;
// with true (objective_for's) the sum of per-token costs, the env's return. The two part only
// where tokens per step change (sequence or batch changes), where the return weighs a short
// step's time per token as much as a long step's. Throws std::runtime_error if the run cannot
// estimate or be cloned.
DynamicSchedule dynamic_oracle(const TrainingRun& run, const PlanObjective& objective, int horizon,
                               const OracleOptions& options = {});

// The episode cut into phases of constant conditions (scenario phases): `start` is the run at
// the phase's first step, `before` one step earlier (null for the first phase). Walks a clone
// of `run` with the plan in force. Throws std::runtime_error if the run cannot be cloned.
struct EpisodePhase {
  int first = 0, steps = 0, phase = 0;
  std::unique_ptr<TrainingRun> before, start;
};
std::vector<EpisodePhase> episode_phases(const TrainingRun& run, int horizon);

// The best static plan in hindsight: the one plan that, kept for the whole episode, costs
// least over the episode's phases as they will happen (time, energy and memory terms of the
// objective summed over steps, each phase weighted by its steps × tokens per step), and fits
// memory in every phase. Exact chain DP over the phases' summed decompositions, checked by
// estimate() in every phase, with the plan in force, each phase's static optimum and every
// uniform plan as a safety net. The one-time repartition into the plan is not part of the
// optimisation (every static plan pays one). "The best static plan" of every comparison.
struct HindsightResult {
  Plan plan;
  double total_cost = 0;  // Σ over phases of weight × steady cost
  int phases = 0;
  bool exact = true;      // DP exact, memory bound tight, decomposition matched the estimates
  std::string chosen_by;  // "dp", "reference", "phase optimum" or "uniform"
  int64_t estimates = 0;
};
HindsightResult hindsight_static(const TrainingRun& run, const RewardSpec& weights, int horizon,
                                 const OracleOptions& options = {});

// The phase oracle: each phase's static optimum, switched to at the phase's first step
// (paying the repartition the env charges), without weighing whether the switch pays.
DynamicSchedule phase_oracle(const TrainingRun& run, const PlanObjective& objective, int horizon,
                             const OracleOptions& options = {});

// Env steps left in the episode: its time limit's, else its experiment's steps_per_episode,
// less the steps taken (at least 1). Throws std::runtime_error when the env states neither.
int episode_steps_left(Env& env);

std::unique_ptr<Agent> make_oracle_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed);
std::unique_ptr<Agent> make_dynamic_oracle_agent(const ParsedId& id, const EnvSpec& spec,
                                                 uint64_t seed);
std::unique_ptr<Agent> make_hindsight_static_agent(const ParsedId& id, const EnvSpec& spec,
                                                   uint64_t seed);
std::unique_ptr<Agent> make_replan_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed);
// dynamic-oracle(objective=time|return): true for time, the default (the agent's schedule
// then minimises with PlanObjective::per_token false); throws std::invalid_argument on
// another key or value.
bool dynamic_oracle_totals(const ParsedId& id);
std::unique_ptr<Agent> make_phase_oracle_agent(const ParsedId& id, const EnvSpec& spec,
                                               uint64_t seed);

}  // namespace shardgym
