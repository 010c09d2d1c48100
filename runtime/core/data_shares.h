// Uneven data-parallel shares: how a plan gives ranks unequal work (docs/design.md, "Uneven
// work and an elastic world").
//
// A plan may end with `@dp(w=4/5/5/2)`: weights of n share groups. Each pipeline stage's P/p
// ranks split into n groups of g = P/(p·n) consecutive ranks; group i of every stage is one
// pipeline replica and trains G·w_i/Σw of the global batch's G sequences per iteration
// (apportioned to whole sequences, apportion() below). A weight of 0 excludes the group: its
// ranks hold no state and take part in no collective, so a plan can run on a subset of the
// world (a lost GPU's group). Without `@dp(...)` every group trains the same share (the even
// plan of every system without uneven shares).
//
// Validity (shares_invalid_reason): n divides P/p; at least one weight is positive; every
// block's tensor-parallel degree divides g, so that a tensor-parallel group lies inside one
// share group and trains one batch.
//
// Gradients: each group's gradients are summed over its sequences' tokens and the
// data-parallel reduction divides by all tokens, so the update equals the even plan's
// (Malleus, arXiv 2410.13333, §4; FlexSP, arXiv 2412.01523) — the simulator prices the same
// reduction, over the groups with a positive weight.
#pragma once

#include <string>
#include <vector>

namespace shardgym {

struct ModelSpec;
struct Plan;

// Empty when `plan`'s shares are valid for `world` ranks (see above), else why not.
std::string shares_invalid_reason(const Plan& plan, const ModelSpec& model, int world);

// `total` whole units split in proportion to `weights` (≥ 0, not all 0): the floors, then the
// largest remainders (ties to the lower index). Σ result = total.
std::vector<int> apportion(int total, const std::vector<int>& weights);

// Per rank of a world of `world` ranks in `stages` stages: the group's sequences over the even
// share, n·s_i/G (1 for every rank without shares, 0 for an excluded group's ranks).
std::vector<double> share_work(const std::vector<int>& weights, int global_batch, int world,
                               int stages);

// Weights (sequences, Σ = total) for n groups of speeds `speed` (≥ 0; 0 = the group cannot
// train: excluded) that minimise the slowest group's time max_i s_i / speed_i: units go one at a
// time to the group that would finish first with one more (exact for this objective).
// All speeds 0: all weights 0.
std::vector<int> balanced_shares(int total, const std::vector<double>& speed);

// "w=4/5/5/2" ↔ weights. parse throws std::invalid_argument naming the text.
std::string shares_to_string(const std::vector<int>& weights);
std::vector<int> parse_shares(const std::string& text);  // the inside of dp(...)

}  // namespace shardgym
