// The oracles' search over data shares (core/data_shares.h, env/share_action.h): which share
// vectors they try and how a static plan is costed over the episode when ranks are lost.
//
// Exact search over every share vector is out of reach (C(G + n − 1, n − 1) vectors for G
// sequences over n groups, times the block plans), so the oracles search a stated subset:
//   - at every planning moment (a phase's first step): the even split, the even split over the
//     groups that can train, the balanced split for the phase's speeds (what the env's
//     `balanced` choice gives there), and each group excluded with the others even;
//   - hindsight-static, from the best of those starts (each phase's, since the one static plan
//     must serve them all), a local search of one-sequence moves between groups, keeping the
//     block plan, until no move lowers the walked episode cost (walked_cost), then the block
//     plan re-optimised under the shares found.
// Named limits: block plans are optimised for at most one share vector per candidate (not
// jointly), and the local search stops at a local optimum.
#pragma once

#include <vector>

#include "agents/objective.h"
#include "runtime/core/training_run.h"

namespace shardgym {

// The starts listed above for the run's conditions now, de-duplicated, each a valid share
// vector (empty = even) for `plan`'s pipeline under `groups` groups (whatever the blocks).
std::vector<std::vector<int>> share_candidates(const TrainingRun& run, const Plan& plan,
                                               int groups);

// A clone of `run` holding `shares` (TrainingRun::clone_holding) with the blocks of
// `preferred`, else of the run's plan, else every block `dp`: the first that those shares
// admit. nullptr when none does.
std::unique_ptr<TrainingRun> hold_shares(const TrainingRun& run, const Plan& preferred,
                                         const std::vector<int>& shares);

// The cost of running `plan` for `horizon` steps from the run's step, as the env charges it:
// Σ_steps tokens · cost per token (objective units), every step's repartition time included
// except the move into the plan (which every static plan pays once), so that the checkpoint
// restarts of a plan that needs a lost rank count. Walks a clone; +inf where the plan is not
// valid or does not fit at some step.
double walked_cost(const TrainingRun& run, const Plan& plan, int horizon,
                   const RewardSpec& weights);

// From `plan`, one-sequence moves between share groups while the walked cost falls (at most
// `max_rounds` rounds of n(n − 1) moves). Returns the best plan found and its cost in `cost`.
Plan local_share_search(const TrainingRun& run, const Plan& plan, int groups, int horizon,
                        const RewardSpec& weights, double& cost, int max_rounds = 64);

// Uneven pipeline stages: from `plan`, one-layer moves of one stage boundary (the env's
// pipeline choices, env/pipeline_action.h) while the walked cost falls, keeping the blocks (at
// most `max_rounds` rounds of 2(p − 1) moves). `plan` unchanged for p = 1.
Plan local_split_search(const TrainingRun& run, const Plan& plan, int horizon,
                        const RewardSpec& weights, double& cost, int max_rounds = 256);

}  // namespace shardgym
