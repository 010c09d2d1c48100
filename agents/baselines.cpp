#include "agents/baselines.h"

#include <algorithm>
#include <cmath>
#include <istream>
#include <limits>
#include <optional>
#include <ostream>
#include <stdexcept>

#include "agents/agent_util.h"
#include "agents/analytic_cost.h"
#include "agents/objective.h"
#include "env/pipeline_action.h"
#include "runtime/core/strategy_family.h"

namespace shardgym {
namespace {

using agents_detail::current_action;
using agents_detail::respect_mask;

// Uniform meshes ATP's planner considers, as catalog entries (tp2d, or tp1d for d2 = 1 when
// the catalog spells it that way), valid for both block kinds.
std::vector<Strategy> atp_meshes(const StrategyCatalog& catalog) {
  std::vector<Strategy> out;
  for (int k = 0; k < catalog.size(); ++k) {
    const Strategy& s = catalog.at(k);
    if (s.chunks != 1 || s.recompute || s.sp || s.degree() < 2) continue;
    if (!family_of(s).atp_mesh()) continue;
    if (!catalog.why_invalid(BlockKind::kAttention, k).empty()) continue;
    if (!catalog.why_invalid(BlockKind::kMlp, k).empty()) continue;
    out.push_back(s);
  }
  return out;
}

// "tp2d(d1=2,d2=4,first=row)" alone means that strategy on every block.
bool is_single_strategy(const std::string& text) {
  if (text.find_first_of(";|:*") != std::string::npos) return false;
  try {
    Strategy::parse(text);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

namespace {

// ATP's search over uniform meshes with `stages` pipeline stages (1: no pipeline part).
AtpResult atp_search_stages(const TrainingRun& run, const RewardSpec& weights, int stages) {
  const ModelSpec& model = run.model();
  const int blocks = model.num_blocks();
  const int world = run.cluster().world_size();
  const std::vector<Strategy> meshes = atp_meshes(run.catalog());
  if (meshes.empty())
    throw std::runtime_error(
        "atp: the catalog holds no tensor-parallel mesh valid for both "
        "block kinds");
  const PlanObjective objective = objective_for(run, weights);
  const bool can_estimate = run.estimate(Plan::uniform(meshes.front(), blocks)).has_value();
  double capacity = std::numeric_limits<double>::infinity();
  for (int r = 0; r < run.cluster().world_size(); ++r)
    capacity = std::min(capacity, run.cluster().device_of(r).memory_bytes);

  AtpResult result;
  result.source = can_estimate ? "estimate" : "alpha-beta";
  result.cost = std::numeric_limits<double>::infinity();
  for (const Strategy& s : meshes) {
    Plan plan = Plan::uniform(s, blocks);
    if (stages > 1) {  // Megatron's micro-batch rule, as megatron_plan
      plan.pipeline.stages = stages;
      plan.pipeline.micro_batches = plan_micro_batches(plan, model, world);
      if (!plan.validate(model, world).empty()) continue;  // t does not divide a stage
    }
    AtpCandidate c{s, 0, true};
    if (can_estimate) {
      c.cost = objective.cost_of(run, plan);
      c.fits = std::isfinite(c.cost);
    } else {
      AnalyticCost a = analytic_plan_cost(model, run.cluster(), plan);
      c.cost = a.total_s();
      c.fits = a.memory_bytes <= capacity;
    }
    result.candidates.push_back(c);
    if (c.fits && c.cost < result.cost) {
      result.cost = c.cost;
      result.strategy = s;
      result.plan = plan;
    }
  }
  if (result.plan.size() == 0)
    throw std::runtime_error("atp: none of the " + std::to_string(meshes.size()) +
                             " uniform meshes fits memory (" + result.source + ")" +
                             (stages > 1 ? " with " + std::to_string(stages) + " stages" : ""));
  return result;
}

}  // namespace

AtpResult atp_search(const TrainingRun& run, const RewardSpec& weights, int max_stages,
                     int min_stages) {
  min_stages = std::max(1, min_stages);
  const int world = run.cluster().world_size(), layers = run.model().layers;
  std::optional<std::runtime_error> first_error;
  // fewest_fitting_stages' rule; only runs that estimate can cost a pipeline.
  const bool can_estimate = max_stages > min_stages && run.estimate(run.plan()).has_value();
  for (int p = min_stages; p <= std::max(min_stages, max_stages) && p <= layers; ++p) {
    if (world % p != 0 || (p != min_stages && (layers % p != 0 || !can_estimate))) continue;
    try {
      return atp_search_stages(run, weights, p);
    } catch (const std::runtime_error& e) {
      if (!first_error) first_error = e;
    }
  }
  if (first_error) throw *first_error;
  return atp_search_stages(run, weights, min_stages);
}

Plan resolve_static_plan(const std::string& text, const TrainingRun& run,
                         const RewardSpec& weights, int max_stages, int min_stages) {
  const ModelSpec& model = run.model();
  Plan plan;
  if (text == "atp") {
    plan = atp_search(run, weights, max_stages, min_stages).plan;
  } else if (text == "dp") {
    plan = Plan::uniform(Strategy::dp(), model.num_blocks());
  } else if (is_single_strategy(text)) {
    plan = Plan::uniform(Strategy::parse(text), model.num_blocks());
  } else {
    plan = resolve_baseline_plan(text, run, min_stages,  // megatron, megatron-sp, plan text
                                 std::max(min_stages, max_stages));
  }
  std::string problem = plan.validate(model, run.cluster().world_size());
  if (!problem.empty()) throw std::invalid_argument("static plan '" + text + "': " + problem);
  return plan;
}

Action plan_to_action(const Plan& plan, const StrategyCatalog& catalog) {
  Action a(plan.size());
  for (int b = 0; b < plan.size(); ++b) {
    int k = catalog.index_of(plan.blocks[b]);
    if (k < 0)
      throw std::invalid_argument("block " + std::to_string(b) + ": strategy '" +
                                  plan.blocks[b].to_string() + "' is not in the catalog (" +
                                  std::to_string(catalog.size()) + " entries)");
    a[b] = k;
  }
  return a;
}

namespace {

class RandomAgent : public Agent {
 public:
  RandomAgent(std::string name, const EnvSpec& spec, uint64_t seed)
      : name_(std::move(name)),
        blocks_(spec.num_blocks),
        catalog_(spec.catalog_size),
        moves_(agents_detail::pipeline_moves(spec)),
        rng_(seed) {}
  std::string name() const override { return name_; }
  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& plan) override {
    auto allowed = agents_detail::allowed_entries(mask, blocks_, catalog_, moves_);
    Action a(blocks_);
    for (int b = 0; b < blocks_; ++b) {
      if (allowed[b].empty())
        throw std::runtime_error("random: block " + std::to_string(b) + " has no allowed entry");
      a[b] = allowed[b][agents_detail::uniform_int(rng_, static_cast<int>(allowed[b].size()))];
    }
    if (moves_ > 0) {  // choice 0 (keep) is always allowed
      const std::vector<int> c = agents_detail::allowed_moves(mask, blocks_, catalog_);
      a.push_back(c[agents_detail::uniform_int(rng_, static_cast<int>(c.size()))]);
    }
    return a;
  }

 protected:
  void write_state(std::ostream& out) const override { agents_detail::write_rng(out, rng_); }
  void read_state(std::istream& in) override { agents_detail::read_rng(in, rng_); }

 private:
  std::string name_;
  int blocks_, catalog_, moves_;
  std::mt19937_64 rng_;
};

class StaticAgent : public Agent {
 public:
  StaticAgent(std::string name, std::string plan_text, const EnvSpec& spec)
      : name_(std::move(name)),
        plan_text_(std::move(plan_text)),
        catalog_(spec.catalog_size),
        stages_(spec.pipeline_stages),
        groups_(spec.share_groups) {}
  std::string name() const override { return name_; }

  // The plan is resolved at the first act() of the episode, when the env has been reset
  // (ATP's planner estimates under the episode's conditions).
  void begin_episode(Env& env) override {
    env_ = &env;
    target_.clear();
  }

  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& plan) override {
    if (target_.empty()) resolve();
    // Where a block's target is masked now (memory with the other blocks as they are), keep
    // that block as it is; the next steps finish the move.
    const int blocks = static_cast<int>(target_.size());
    Action current = current_action(plan, blocks);
    Action wanted = target_;
    if (stages_ > 1 || groups_ > 0) {  // the plan-level component: keep unless ...
      int c = 0;
      if (stages_ > 1) {  // one boundary move per step towards the plan's split
        Pipeline now = target_pipeline_;
        now.split = env_->run().plan().pipeline.layers_per_stage(blocks / 2);
        c = pipeline_choice_toward(now, target_pipeline_, blocks / 2);
      }
      if (c == 0 && groups_ > 0) {  // ... the shares differ from the plan's (none: even)
        Plan target;
        target.pipeline = target_pipeline_;
        c = agents_detail::plan_choice_toward(*env_, target);
      }
      wanted.push_back(c);
    }
    return respect_mask(wanted, current, mask, catalog_);
  }

 private:
  void resolve() {
    if (!env_)
      throw std::logic_error(name_ +
                             ": act() before begin_episode(env): the plan is resolved "
                             "from the env's run");
    std::string text = plan_text_;
    const ExperimentSpec* exp = find_experiment(*env_);
    if (text.empty()) text = exp && !exp->agent.plan.empty() ? exp->agent.plan : "megatron";
    RewardSpec weights = objective_for(*env_).weights;
    // The plan takes the env's stage count (see the header): with one stage, as before.
    Plan plan = resolve_static_plan(text, env_->run(), weights, stages_, stages_);
    if (plan.pipeline.is_default() && stages_ > 1) {
      // A plan without a pipeline part ("dp", one strategy) runs in the env's stages, evenly.
      plan.pipeline = env_->run().plan().pipeline;
      plan.pipeline.split.clear();
      const TrainingRun& run = env_->run();
      const std::string why = plan.validate(run.model(), run.cluster().world_size());
      if (!why.empty()) throw std::invalid_argument(name_ + ": plan '" + text + "': " + why);
    }
    if (plan.stages() != stages_)
      throw std::invalid_argument(name_ + ": plan '" + text + "' has " +
                                  std::to_string(plan.stages()) + " pipeline stages, the env " +
                                  std::to_string(stages_) +
                                  " (actions cannot change the number of stages)");
    target_ = plan_to_action(plan, env_->run().catalog());
    target_pipeline_ = plan.pipeline;
  }

  std::string name_, plan_text_;
  int catalog_, stages_, groups_;
  Env* env_ = nullptr;
  Action target_;
  Pipeline target_pipeline_;
};

}  // namespace

std::unique_ptr<Agent> make_random_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed) {
  id.check_keys({});
  return std::make_unique<RandomAgent>(id.to_string(), spec, seed);
}

std::unique_ptr<Agent> make_static_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed,
                                         const std::string& fixed_plan) {
  if (!fixed_plan.empty()) {
    id.check_keys({});
    return std::make_unique<StaticAgent>(id.to_string(), fixed_plan, spec);
  }
  id.check_keys({"plan"});
  return std::make_unique<StaticAgent>(id.to_string(), id.get("plan", std::string()), spec);
}

}  // namespace shardgym
