// Online search agents that learn only from the env's rewards (no cost model, no lookahead):
// act() proposes a plan, observe() receives that proposal's reward.
//
//   random-search(budget=32)      `budget` uniform random plans, then the best one seen
//   greedy(scope=block,tol=0)     coordinate descent: change one block (scope=kind: every block
//                                 of one kind) to another entry, keep it if the reward improved
//                                 by more than tol·|reward|; a sweep without improvement stops
//                                 the search until the incumbent's reward drifts by `restart`
//   anneal(t0=0.05,decay=0.98,t_min=1e-3)   simulated annealing on the same neighbourhood:
//                                 accept a worse plan with probability exp(Δ/(T·|r|)),
//                                 T ← T·decay per proposal; once cold, the best plan seen;
//                                 reheats on drift
//
// Common parameters: settle=1 holds each changed plan one more step and judges it by the
// second reward, which carries no repartition cost (settle=0 judges the first reward);
// restart=0.05 is the relative drift of the incumbent's reward that restarts the search (the
// scenario changed). Agents keep their incumbent across episodes and re-measure it at the
// start of each one. Every proposal passes through the mask: a block whose wanted entry is
// masked keeps its current entry, so no returned action is ever masked.
#pragma once

#include "agents/agent.h"

namespace shardgym {

std::unique_ptr<Agent> make_random_search_agent(const ParsedId& id, const EnvSpec& spec,
                                                uint64_t seed);
std::unique_ptr<Agent> make_greedy_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed);
std::unique_ptr<Agent> make_anneal_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed);
// Their parameter checks (no env needed): throw std::invalid_argument as the factories would.
void check_random_search_params(const ParsedId& id);
void check_greedy_params(const ParsedId& id);
void check_anneal_params(const ParsedId& id);

}  // namespace shardgym
