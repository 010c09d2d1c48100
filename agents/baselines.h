// Baseline agents: a uniform random policy and static plans (Megatron-LM, ATP, pure data
// parallel, or any plan text). A static agent resolves its plan in begin_episode() from the
// run's model and cluster and then asks for the same plan at every step.
//
//   random                 uniform over each block's allowed entries, seeded
//   static(plan=PLAN)      PLAN = megatron | megatron-sp | atp | dp | a plan text | one
//                          strategy (on every block); without `plan`, the experiment's
//                          agent.plan, else megatron
//   megatron, megatron-sp, atp, dp    static with that plan
//
// ATP's planner (Cheng et al. 2023, reconstructed from the public code): every uniform mesh
// d1×d2 = t of the catalog (t | P, d2 = 1 included as Megatron 1D, first=row and first=col,
// no chunking or recomputation) is costed and the cheapest one that fits memory wins. The
// cost is the run's estimate() when it has one (the sim's hierarchical-link model), else the
// closed-form α–β model of analytic_cost.h on the communication matrix.
//
// Pipelines (catalog.max_pipeline_stages > 1): Megatron and ATP pick their pipeline degree as
// their users do (fewest_fitting_stages, training_run.h): the fewest stages with which the
// model fits, with the TP degree / mesh chosen within a stage. In an env, whose plans keep the
// p of its initial plan (the action cannot change p; `initial_plan: megatron` follows the rule
// above), a static agent resolves its plan for exactly that p and moves the stage boundaries
// one layer per step towards its plan's even split.
#pragma once

#include <string>
#include <vector>

#include "agents/agent.h"
#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"

namespace shardgym {

struct AtpCandidate {
  Strategy strategy;
  double cost = 0;  // PlanObjective cost (estimate) or seconds per iteration (α–β)
  bool fits = true;
};

struct AtpResult {
  Plan plan;
  Strategy strategy;
  double cost = 0;
  std::string source;  // "estimate" | "alpha-beta"
  std::vector<AtpCandidate> candidates;
};

// The cheapest uniform mesh with the fewest pipeline stages in [min_stages, max_stages] that
// fits (one stage: as before pipelines). Throws std::runtime_error when no mesh fits memory.
AtpResult atp_search(const TrainingRun& run, const RewardSpec& weights, int max_stages = 1,
                     int min_stages = 1);

// "megatron", "megatron-sp", "atp", "dp", a plan text or one strategy, for this run; the
// first three with the pipeline rule above. Throws std::invalid_argument when the plan does
// not parse or is not valid for the model.
Plan resolve_static_plan(const std::string& text, const TrainingRun& run,
                         const RewardSpec& weights, int max_stages = 1, int min_stages = 1);

// The catalog index of every block of `plan`; throws std::invalid_argument naming the first
// strategy that is not in the catalog.
Action plan_to_action(const Plan& plan, const StrategyCatalog& catalog);

std::unique_ptr<Agent> make_random_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed);
// fixed_plan: "" for `static` (plan from the id / experiment), else the plan of a named
// baseline ("megatron", "atp", ...).
std::unique_ptr<Agent> make_static_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed,
                                         const std::string& fixed_plan);

}  // namespace shardgym
