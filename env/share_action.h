// The data-share part of the action (docs/design.md, "Uneven work and an elastic world"): with
// `data_shares: {groups: n}` in the config, the plan-level action component (the one that moves
// pipeline boundaries, env/pipeline_action.h) gets S more choices after the pipeline's, each
// setting the plan's data shares (core/data_shares.h) from the shares in force:
//
//   even          every group that can train gets the same share; a group with a lost rank
//                 (no spare standing in) gets none, so the plan runs on the survivors
//   balanced      shares in proportion to each group's speed (its slowest rank's device
//                 speed / slowdown; 0 with a lost rank), in whole sequences (balanced_shares)
//   without i     group i gets none, the others that can train the same share
//   i → j         one sequence of group i's share moves to group j (i ≠ j; i must have one)
//
// so S = 2 + n + n·(n − 1) = 2 + n². Every share vector is reachable, and the ones a planner
// most often wants (even, balanced, a group left out) in one step.
// Shares are held in sequences of the global batch (Σ = G). The component's choices are then
//   0                      keep (boundaries and shares as they are)
//   1 .. Pp − 1            the pipeline's boundary moves (Pp = pipeline_choices(p), p > 1)
//   Pp' + s                share choice s (Pp' = max(1, Pp): after keep and the moves)
// so the component has Pp' + S choices, one plan-level change per step. Masked like the
// pipeline moves: a choice is allowed when the plan it gives, with the blocks as they are, is
// valid and fits memory, or when it would with every block whose degree spans a share group
// narrowed to an allowed one that does not (the blocks of the same step can move with the
// shares: leaving a lost rank's group out in one step). A share choice that the blocks chosen
// in the same step do not admit (a degree that spans share groups, or together more memory
// than a rank has) takes them narrowed by that rule (admitted_with_shares; the step's info
// has the scalar "blocks_narrowed"); where that does not fit either, it is not applied: the
// shares in force stay ("plan_choice_refused", PartitionEnv).
//
// The observation gets a "shares" part before the pipeline part: per group, its share over the
// even one, its speed and whether it can train (3 entries per group).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/core/cluster_spec.h"
#include "runtime/core/plan.h"
#include "runtime/core/training_run.h"

namespace shardgym {

// Share groups are at most this many: the mask prices every choice (S grows as n²).
constexpr int kMaxShareActionGroups = 16;

int share_choices(int groups);  // 2 + n²; 0 for n = 0
// Choices of the whole plan-level component: 0 when neither pipeline nor shares has any.
int plan_component_choices(int stages, int groups);
// Index of share choice 0 in the plan-level component.
int share_choice_offset(int stages);

// Per share group of a stage (consecutive ranks, every stage alike): the speed of its slowest
// rank, peak FLOP/s of its device over the cluster's fastest device's, divided by its slowdown;
// 0 if any of its ranks (in any stage) cannot train. Empty vectors: nominal.
std::vector<double> share_group_speeds(int groups, const ClusterSpec& cluster, int stages,
                                       const std::vector<double>& rank_slowdown,
                                       const std::vector<uint8_t>& rank_alive);

// Whether the plan-level component offers the shares of `trial` with the blocks of `trial` in
// force (see above): `trial` fits `run`, or it would with every block whose tensor-parallel
// degree spans a share group narrowed to its allowed catalog entry with the largest degree
// that divides a group (the least memory among those). The dynamic oracle reaches plans by
// the same rule.
bool share_choice_admissible(const TrainingRun& run, const Plan& trial);
// The plan that rule admits: `trial` where it fits, else `trial` with those blocks narrowed
// where that fits; nullopt where neither does.
std::optional<Plan> admitted_with_shares(const TrainingRun& run, const Plan& trial);

// The shares (sequences) after share choice `s` from `current` (empty = even): see above.
// Returns `current` unchanged where the choice cannot apply (a move from a group with none).
std::vector<int> apply_share_choice(const std::vector<int>& current, int s, int groups,
                                    int global_batch, const std::vector<double>& speeds);

// A share choice that brings `current` one step closer to `target` (both sequences or empty):
// even, balanced or a group left out when one of them gives `target` exactly, else a move of
// one sequence from a group above its target to one below; -1 when they are equal.
int share_choice_toward(const std::vector<int>& current, const std::vector<int>& target,
                        int groups, int global_batch, const std::vector<double>& speeds);

}  // namespace shardgym
