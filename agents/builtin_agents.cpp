// Registration of the built-in agents (linked into every executable via shardgym::builtins).
#include "agents/agent.h"
#include "agents/baselines.h"
#include "agents/oracle.h"
#include "agents/search.h"

namespace shardgym {
namespace {

AgentFactory static_plan(const std::string& plan) {
  return [plan](const ParsedId& id, const EnvSpec& spec, uint64_t seed) {
    return make_static_agent(id, spec, seed, plan);
  };
}

void static_params(const ParsedId& id) { id.check_keys({"plan"}); }
void check_dynamic_oracle_params(const ParsedId& id) { dynamic_oracle_totals(id); }

REGISTER_SHARDGYM_AGENT("random", "uniform over each block's allowed entries (seeded)",
                        make_random_agent, no_agent_params);
REGISTER_SHARDGYM_AGENT("static",
                        "one plan all episode: static(plan=megatron|megatron-sp|atp|dp|PLAN)",
                        static_plan(""), static_params);
REGISTER_SHARDGYM_AGENT("megatron", "static Megatron-LM plan (tp1d within a node, dp across)",
                        static_plan("megatron"), no_agent_params);
REGISTER_SHARDGYM_AGENT("megatron-sp", "static Megatron-LM plan with sequence parallelism",
                        static_plan("megatron-sp"), no_agent_params);
REGISTER_SHARDGYM_AGENT("atp", "static ATP plan: best uniform 2D mesh by ATP's planner",
                        static_plan("atp"), no_agent_params);
REGISTER_SHARDGYM_AGENT("dp", "static pure data parallelism", static_plan("dp"), no_agent_params);
REGISTER_SHARDGYM_AGENT("random-search", "online random search over plans, keeps the best",
                        make_random_search_agent, check_random_search_params);
REGISTER_SHARDGYM_AGENT("greedy", "online coordinate descent over blocks from rewards",
                        make_greedy_agent, check_greedy_params);
REGISTER_SHARDGYM_AGENT("anneal", "online simulated annealing over plans from rewards",
                        make_anneal_agent, check_anneal_params);
REGISTER_SHARDGYM_AGENT("oracle",
                        "static oracle: exact chain DP on the cost model under the episode's "
                        "starting conditions (needs estimate())",
                        make_oracle_agent, no_agent_params);
REGISTER_SHARDGYM_AGENT("dynamic-oracle",
                        "re-plans per scenario phase knowing the future, paying repartitions, "
                        "for the least episode time (objective=return: the env's return, the "
                        "sum of per-token times) (needs estimate() and a cloneable run)",
                        make_dynamic_oracle_agent, check_dynamic_oracle_params);
REGISTER_SHARDGYM_AGENT("hindsight-static",
                        "the best static plan in hindsight: one plan for the whole episode, "
                        "chosen knowing its phases (needs estimate() and a cloneable run)",
                        make_hindsight_static_agent, no_agent_params);
REGISTER_SHARDGYM_AGENT("replan",
                        "re-solves the best plan for the conditions now whenever they change "
                        "and moves when the saving over the steps left pays for the move; no "
                        "knowledge of the future (needs estimate())",
                        make_replan_agent, no_agent_params);
REGISTER_SHARDGYM_AGENT("phase-oracle",
                        "each phase's static optimum, switched to at the phase's start, "
                        "repartition paid (needs estimate() and a cloneable run)",
                        make_phase_oracle_agent, no_agent_params);

}  // namespace
}  // namespace shardgym
