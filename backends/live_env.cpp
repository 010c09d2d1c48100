// Registers the live env: PartitionEnv over a LiveRun, its `live.extra` options and the checks
// a live spec needs beyond the schema.
#include <memory>

#include "env/partition_env.h"
#include "env/registry.h"
#include "runtime/core/cost.h"
#include "runtime/live/driver/live_run.h"
#include "runtime/live/launch/world_limits.h"

namespace shardgym {
namespace {

constexpr const char* kLiveId = "shardgym/TPLive-v0";

// What the live backend needs beyond the schema: one rank per cluster device, a world this
// host can hold, no simulated scenario, room for the byte-level tokenizer, a batch the ranks
// can split (live_run.cpp checks the same when it starts), and a fault it can inject.
void validate_live(const ExperimentSpec& spec) {
  const int world = spec.cluster.world_size();
  if (spec.live.ranks != world) {
    throw EnvOptionError("live.ranks", "live.ranks = " + std::to_string(spec.live.ranks) +
                                           " but the cluster has " + std::to_string(world) +
                                           " devices; " + kLiveId + " runs one rank per device");
  }
  // A world this host cannot hold (file descriptors, threads, cores) fails late and badly
  // once ranks start (runtime/live/launch/world_limits.h): refused here, naming the key.
  live::LiveWorld w;
  w.ranks = spec.live.ranks;
  w.thread_launch = spec.live.launch == "threads";
  w.threads_per_rank = spec.live.threads_per_rank;
  if (const std::string why = live::why_world_does_not_fit(w, live::host_limits()); !why.empty())
    throw EnvOptionError("live.ranks", why);
  // A live run measures itself: of the simulator's scenario, only straggler events have
  // something to act on (a rank's compute is stretched: RankTrainer::set_compute_stretch);
  // links, sequence lengths, batches and lost ranks are not emulated, and ignoring them
  // silently would mislabel every figure of the run.
  if (spec.scenario.noise > 0)
    throw EnvOptionError("scenario.noise", std::string(kLiveId) +
                                               " measures a real run and applies no timing "
                                               "noise; remove it, or use shardgym/TPSim-v0");
  const std::string where = spec.scenario.draws.empty() ? "scenario.events" : "scenario.draw";
  for (const ScenarioEvent& e : spec.scenario.drawn().events) {
    if (e.kind != EventKind::kStraggler)
      throw EnvOptionError(where, std::string(kLiveId) +
                                      " emulates straggler events only (a rank's compute "
                                      "stretched); use shardgym/TPSim-v0 for the others");
    if (!(e.factor >= 1 && e.factor <= 100))
      throw EnvOptionError(where, "a live straggler's factor must lie in [1, 100] (a rank "
                                  "can be slowed, not sped up), not " + std::to_string(e.factor));
  }
  if (const std::string why = live::why_model_not_live(spec.model); !why.empty())
    throw EnvOptionError("model", why);
  if (spec.model.vocab < 256)
    throw EnvOptionError("model.vocab",
                         "the live model's byte-level tokenizer needs a vocab of at least 256");
  const int batch = effective_global_batch(spec.model, world);
  if (batch % world != 0) {
    throw EnvOptionError("model.global_batch", "global batch " + std::to_string(batch) +
                                                   " is not a multiple of the " +
                                                   std::to_string(world) + " live ranks");
  }
  if (const std::string why = live::why_fault_invalid(spec.live); !why.empty())
    throw EnvOptionError("live.extra.fault", why);
}

EnvType live_type() {
  EnvType t;
  t.id = kLiveId;
  t.description =
      "live tensor-parallel GPT training on c10d ranks (Gloo on CPU; threads or processes)";
  t.factory = [](const ExperimentSpec& s) {
    return std::make_unique<PartitionEnv>(kLiveId, std::make_unique<live::LiveRun>(s), s);
  };
  t.flags.deterministic = false;      // wall-clock figures of a real run
  t.flags.platform_dependent = true;  // ... on this machine
  t.flags.needs_libtorch = true;
  t.flags.real_run = true;
  // Ranges: as the loader had them; the learning rate and decay are AdamW's, which any
  // non-negative value keeps well defined.
  t.options = {
      EnvOption::real(
          "lr", "live.extra.lr", "AdamW learning rate of every rank",
          [](ExperimentSpec& s) -> double& { return s.live.extra.lr; }, 0, 1e6),
      EnvOption::real(
          "weight_decay", "live.extra.weight_decay", "AdamW weight decay",
          [](ExperimentSpec& s) -> double& { return s.live.extra.weight_decay; }, 0, 1e6),
      EnvOption::real(
          "clip", "live.extra.clip",
          "gradient clipping by global norm (torch.nn.utils.clip_grad_norm_); "
          "0 = none",
          [](ExperimentSpec& s) -> double& { return s.live.extra.clip; }, 0, 1e6),
      EnvOption::text("fault", "live.extra.fault",
                      "fault injection for failure tests: <throw|stall|exit>@<rank>:<step> or "
                      "nostart@<rank>; exit needs launch: processes, nostart threads",
                      [](ExperimentSpec& s) -> std::string& { return s.live.extra.fault; }),
      EnvOption::path("worker", "live.extra.worker",
                      "rank-worker executable for launch: processes (default: "
                      "$SHARDGYM_RANK_WORKER, else the one built next to shardgym)",
                      [](ExperimentSpec& s) -> std::string& { return s.live.extra.worker; }),
  };
  t.validate = validate_live;
  return t;
}

REGISTER_SHARDGYM_ENV(live_type());

}  // namespace
}  // namespace shardgym
