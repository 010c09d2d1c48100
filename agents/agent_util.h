// Small helpers shared by the agents (not part of the public agent API): masks, the current
// plan as the observation encodes it, seeded integer draws that do not depend on the
// standard library's distributions (so a seed means the same actions everywhere), rng state
// as text for save/load.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <random>
#include <string>
#include <vector>

#include "env/env.h"

namespace shardgym::agents_detail {

// The env's plan-level component (env/pipeline_action.h, env/share_action.h: boundary moves
// and data-share choices): its number of choices, which follow the B·K block entries in the
// mask and the B block entries in an action; 0 without one.
int pipeline_moves(const EnvSpec& spec);

// Allowed catalog entries of each block: mask[b*K + k] == 1. Throws if the size is not
// blocks·catalog + moves.
std::vector<std::vector<int>> allowed_entries(const std::vector<uint8_t>& mask, int blocks,
                                              int catalog, int moves = 0);
// Allowed pipeline choices: mask[B·K + c] == 1 (empty without a pipeline component).
std::vector<int> allowed_moves(const std::vector<uint8_t>& mask, int blocks, int catalog);
// `a` (B entries, or B + 1 with a pipeline choice) lies in the space and the mask.
bool action_allowed(const Action& a, const std::vector<uint8_t>& mask, int catalog);

// The plan in force as an action: the first `blocks` entries of `plan` (Agent::act's plan,
// Info::plan_indices), -1 kept where a block's strategy is not in the catalog (respect_mask
// replaces it). Throws if `plan` has fewer entries.
Action current_action(const std::vector<int32_t>& plan, int blocks);

// Per block (current.size() blocks): `wanted` where the mask allows it, else `current` where
// allowed, else the first allowed entry (else `current`: a block with no allowed entry cannot
// be helped). A trailing pipeline choice in `wanted` is kept where allowed, else 0 (keep).
Action respect_mask(const Action& wanted, const Action& current, const std::vector<uint8_t>& mask,
                    int catalog);

// The plan-level choice (0: keep) that moves the env's data shares one step toward `target`'s
// (env/share_action.h share_choice_toward), keeping the stage boundaries; 0 without share
// choices or when the shares already match.
int plan_choice_toward(Env& env, const Plan& target);

// Uniform integer in [0, n) from raw 64-bit draws (modulo with rejection; no std distribution).
int uniform_int(std::mt19937_64& rng, int n);
// Uniform double in [0, 1) from the top 53 bits of one draw.
double uniform_real(std::mt19937_64& rng);

void write_rng(std::ostream& out, const std::mt19937_64& rng);
void read_rng(std::istream& in, std::mt19937_64& rng);  // throws std::runtime_error
// Exact text round-trips (doubles as their bit pattern, so NaN and ±inf survive).
void write_double(std::ostream& out, double v);
double read_double(std::istream& in);
void write_action(std::ostream& out, const Action& a);
// Saved state is untrusted (agents/checkpoint_file.h): an action must have 0 or `blocks`
// entries, each in [0, catalog); an integer must lie in [lo, hi]. Throws std::runtime_error
// naming `what`.
Action read_action(std::istream& in, int blocks, int catalog, const char* what);
int64_t read_int(std::istream& in, int64_t lo, int64_t hi, const char* what);
// A saved reward: NaN (none yet) or finite.
double read_reward(std::istream& in, const char* what);

}  // namespace shardgym::agents_detail
