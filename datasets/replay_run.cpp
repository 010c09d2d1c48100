#include "datasets/replay_run.h"

#include <algorithm>
#include <stdexcept>

#include "datasets/trace_reader.h"

namespace shardgym {

namespace {

std::string first_difference(const Plan& asked, const Plan& recorded) {
  if (asked.size() != recorded.size()) {
    return "the plan has " + std::to_string(asked.size()) + " blocks, the recording " +
           std::to_string(recorded.size());
  }
  for (int b = 0; b < asked.size(); ++b) {
    if (asked.blocks[b] != recorded.blocks[b]) {
      return "block " + std::to_string(b) + " asks for " + asked.blocks[b].to_string() +
             ", the recording has " + recorded.blocks[b].to_string();
    }
  }
  return "";
}

}  // namespace

ReplayRun::ReplayRun(const ExperimentSpec& spec, const std::string& trace_path)
    : spec_(with_drawn_events(spec)),
      path_(trace_path),
      catalog_(spec.model, spec.cluster.world_size(), spec.catalog) {
  const std::string where = "ReplayRun('" + trace_path + "')";
  TraceReader reader(trace_path);
  const int blocks = spec.model.num_blocks(), world = spec.cluster.world_size();
  auto require_in_catalog = [&](const Plan& plan, const std::string& what) {
    for (int b = 0; b < plan.size(); ++b) {
      if (catalog_.index_of(plan.blocks[b]) < 0) {
        throw std::invalid_argument(where + ": " + what + " block " + std::to_string(b) + " uses " +
                                    plan.blocks[b].to_string() +
                                    ", which the spec's catalog does not offer (different "
                                    "catalog options than the recording?)");
      }
    }
  };
  auto recorded = std::make_shared<std::vector<Recorded>>();
  for (const TraceEpisodeInfo& info : reader.episodes()) {
    if (!info.complete) continue;
    Recorded r;
    r.data = reader.read_episode(info.index);
    const TraceEpisode& ep = r.data;
    if (ep.num_blocks != blocks || ep.world != world) {
      throw std::invalid_argument(where + ": " + info.name + " was recorded with " +
                                  std::to_string(ep.num_blocks) + " blocks on " +
                                  std::to_string(ep.world) + " ranks, the spec has " +
                                  std::to_string(blocks) + " blocks (" + spec.model.name + ") on " +
                                  std::to_string(world) + " ranks (" + spec.cluster.name + ")");
    }
    if (info.initial_plan.empty()) {
      throw std::invalid_argument(where + ": " + info.name + " has no initial plan");
    }
    r.initial_plan = Plan::parse(info.initial_plan, blocks);
    require_in_catalog(r.initial_plan, info.name + " initial plan");
    for (int t = 0; t < ep.steps(); ++t) {
      if (ep.ok[t]) {
        r.plans.push_back(ep.plan(t, reader.strategies()));
        require_in_catalog(r.plans.back(), info.name + " step " + std::to_string(t));
      } else {
        // A failed step left the plan unchanged; what it asked for is in the action row,
        // when the action is the standard one-index-per-block form.
        std::optional<Plan> asked;
        if (ep.action_dim == blocks) {
          Plan p;
          for (int b = 0; b < blocks; ++b) {
            const int a = ep.actions[static_cast<size_t>(t) * blocks + b];
            if (a < 0 || a >= catalog_.size()) break;
            p.blocks.push_back(catalog_.at(a));
          }
          if (p.size() == blocks) asked = p;
        }
        r.plans.push_back(asked ? *asked : Plan());  // empty: any plan replays the failure
      }
    }
    recorded->push_back(std::move(r));
  }
  if (recorded->empty()) {
    throw std::invalid_argument(where + ": the trace has no complete episode (" +
                                std::to_string(reader.episodes().size()) + " incomplete)");
  }
  episodes_ = std::move(recorded);
  plan_ = (*episodes_)[0].initial_plan;
}

void ReplayRun::reset(uint64_t seed, const Plan& initial) {
  const std::string why = initial.validate(spec_.model, spec_.cluster.world_size());
  if (!why.empty()) throw std::invalid_argument("ReplayRun::reset: initial plan: " + why);
  const auto& eps = *episodes_;
  auto it = std::find_if(eps.begin(), eps.end(),
                         [&](const Recorded& r) { return r.data.info.seed == seed; });
  current_ = it != eps.end() ? static_cast<size_t>(it - eps.begin()) : seed % eps.size();
  calls_ = 0;
  plan_ = initial;
  divergence_.clear();
}

Measurement ReplayRun::fail(const std::string& why) const {
  Measurement m;
  m.ok = false;
  m.error = why;
  m.latency_source = m.memory_source = m.energy_source = "replay";
  return m;
}

Measurement ReplayRun::replay_step(const Plan& plan) {
  const Recorded& ep = (*episodes_)[current_];
  const std::string where = "replay of " + ep.data.info.name + " from '" + path_ + "'";
  if (!divergence_.empty()) return fail(divergence_ + " (reset() to replay again)");
  const int t = calls_ - 1;  // recorded step; -1 = the reference iteration after reset
  if (t >= ep.data.steps()) {
    return fail(where + ": the recording ended after " + std::to_string(ep.data.steps()) +
                " steps");
  }
  const Plan& expected = t < 0 ? ep.initial_plan : ep.plans[t];
  if (!expected.blocks.empty() && plan != expected) {
    const std::string label =
        t < 0 ? std::string("reference iteration") : "step " + std::to_string(t);
    divergence_ = where + ", " + label + ": " + first_difference(plan, expected) +
                  "; a trace holds only the recorded plans";
    return fail(divergence_);
  }
  ++calls_;
  Measurement m = t < 0 ? ep.data.initial : ep.data.measurement(t);
  if (m.ok) plan_ = plan;
  return m;
}

RunContext ReplayRun::current_context() const {
  RunContext c;
  c.step = calls_;
  c.phase = spec_.scenario.phase_at(calls_);
  c.num_phases = spec_.scenario.num_phases();
  // The trace's actions say whether a spare stood in for a lost rank; here it is lost.
  const ScenarioState state = spec_.scenario.state_at(calls_, spec_.cluster);
  c.link_bw_factor = state.link_factor;
  c.rank_slowdown = state.slowdown;
  c.rank_alive.resize(state.lost.size());
  for (size_t r = 0; r < state.lost.size(); ++r) c.rank_alive[r] = !state.lost[r];
  if (state.seq > 0 && spec_.model.seq > 0)
    c.seq_factor = static_cast<double>(state.seq) / spec_.model.seq;
  for (double f : state.slowdown) c.max_compute_slowdown = std::max(c.max_compute_slowdown, f);
  for (int r = 0; r < spec_.cluster.world_size(); ++r) {
    const double mem = spec_.cluster.device_of(r).memory_bytes;
    c.memory_capacity = r == 0 ? mem : std::min(c.memory_capacity, mem);
  }
  return c;
}

std::vector<uint8_t> ReplayRun::mask_row(int block) const {
  if (block < 0 || block >= spec_.model.num_blocks()) {
    throw std::out_of_range("ReplayRun::action_mask: block " + std::to_string(block) +
                            " outside [0, " + std::to_string(spec_.model.num_blocks()) + ")");
  }
  return catalog_.shape_mask(ModelSpec::block_kind(block));
}

std::optional<Plan> ReplayRun::next_plan() const {
  const Recorded& ep = (*episodes_)[current_];
  const int t = calls_ - 1;
  if (t < 0) return ep.initial_plan;
  if (t >= ep.data.steps() || ep.plans[t].blocks.empty()) return std::nullopt;
  return ep.plans[t];
}

int ReplayRun::steps_left() const {
  return std::max(0, (*episodes_)[current_].data.steps() - std::max(0, calls_ - 1));
}

std::optional<Measurement> ReplayRun::estimate(const Plan& plan) const {
  const Recorded& ep = (*episodes_)[current_];
  const int t = calls_ - 1;
  if (t >= 0 && t < ep.data.steps() && !ep.plans[t].blocks.empty() && plan == ep.plans[t]) {
    return ep.data.measurement(t);
  }
  if (plan == ep.initial_plan) return ep.data.initial;
  return std::nullopt;
}

std::unique_ptr<TrainingRun> ReplayRun::clone() const { return std::make_unique<ReplayRun>(*this); }

}  // namespace shardgym
