#include "env/share_action.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "env/pipeline_action.h"
#include "runtime/core/data_shares.h"

namespace shardgym {
namespace {

// Sequences of each group: `current`, or the even split when empty.
std::vector<int> sequences(const std::vector<int>& current, int groups, int global_batch) {
  if (static_cast<int>(current.size()) == groups) return apportion(global_batch, current);
  return apportion(global_batch, std::vector<int>(groups, 1));
}

// Shares as the plan holds them: none for the even split (so that "even" gives back the plan
// without a `@dp(...)` part, which admits every tensor-parallel degree again).
std::vector<int> normalised(std::vector<int> seqs, int groups, int global_batch) {
  if (seqs == sequences({}, groups, global_batch)) return {};
  return seqs;
}

}  // namespace

int share_choices(int groups) { return groups > 0 ? 2 + groups * groups : 0; }

int share_choice_offset(int stages) { return std::max(1, pipeline_choices(stages)); }

int plan_component_choices(int stages, int groups) {
  if (groups <= 0) return pipeline_choices(stages);
  return share_choice_offset(stages) + share_choices(groups);
}

std::vector<double> share_group_speeds(int groups, const ClusterSpec& cluster, int stages,
                                       const std::vector<double>& rank_slowdown,
                                       const std::vector<uint8_t>& rank_alive) {
  const int world = cluster.world_size();
  std::vector<double> speed(std::max(0, groups), 1.0);
  if (groups <= 0 || world <= 0) return speed;
  const int stage_world = world / std::max(1, stages), g = std::max(1, stage_world / groups);
  double fastest = 0;
  for (const DeviceType& d : cluster.devices) fastest = std::max(fastest, d.peak_flops);
  std::vector<double> slowest(groups, std::numeric_limits<double>::infinity());
  std::vector<uint8_t> dead(groups, 0);
  int rank = 0;
  for (const NodeSpec& node : cluster.nodes) {
    const int d = cluster.device_index(node.device);
    const double base = d >= 0 && fastest > 0 ? cluster.devices[d].peak_flops / fastest : 1.0;
    for (int k = 0; k < node.gpus && rank < world; ++k, ++rank) {
      const int i = std::min(groups - 1, (rank % stage_world) / g);
      const double slow = rank < static_cast<int>(rank_slowdown.size()) ? rank_slowdown[rank] : 1.0;
      slowest[i] = std::min(slowest[i], base / std::max(slow, 1e-12));
      if (rank < static_cast<int>(rank_alive.size()) && !rank_alive[rank]) dead[i] = 1;
    }
  }
  for (int i = 0; i < groups; ++i)
    speed[i] = dead[i] ? 0.0 : (std::isfinite(slowest[i]) ? slowest[i] : 1.0);
  return speed;
}

std::vector<int> apply_share_choice(const std::vector<int>& current, int s, int groups,
                                    int global_batch, const std::vector<double>& speeds) {
  if (s < 0 || s >= share_choices(groups))
    throw std::out_of_range("share choice " + std::to_string(s) + " outside [0, " +
                            std::to_string(share_choices(groups)) + ")");
  if (s == 0 || s == 1) {
    std::vector<double> speed(groups, 1.0);
    for (int i = 0; i < groups && i < static_cast<int>(speeds.size()); ++i)
      speed[i] = s == 0 ? (speeds[i] > 0 ? 1.0 : 0.0) : speeds[i];
    std::vector<int> out = balanced_shares(global_batch, speed);
    if (std::all_of(out.begin(), out.end(), [](int x) { return x == 0; })) return current;
    return normalised(std::move(out), groups, global_batch);
  }
  if (s < 2 + groups) {  // group s − 2 left out, the others that can train even
    std::vector<double> speed(groups, 1.0);
    for (int i = 0; i < groups; ++i)
      speed[i] = i == s - 2 || (i < static_cast<int>(speeds.size()) && !(speeds[i] > 0)) ? 0.0 : 1.0;
    std::vector<int> out = balanced_shares(global_batch, speed);
    if (std::all_of(out.begin(), out.end(), [](int x) { return x == 0; })) return current;
    return normalised(std::move(out), groups, global_batch);
  }
  const int k = s - 2 - groups, from = k / (groups - 1), rest = k % (groups - 1);
  const int to = rest < from ? rest : rest + 1;
  std::vector<int> out = sequences(current, groups, global_batch);
  if (out[from] == 0) return current;
  --out[from];
  ++out[to];
  return normalised(std::move(out), groups, global_batch);
}

int share_choice_toward(const std::vector<int>& current, const std::vector<int>& target,
                        int groups, int global_batch, const std::vector<double>& speeds) {
  const std::vector<int> now = sequences(current, groups, global_batch);
  const std::vector<int> want = sequences(target, groups, global_batch);
  if (now == want) return -1;
  for (int s = 0; s < 2 + groups; ++s)
    if (sequences(apply_share_choice(current, s, groups, global_batch, speeds), groups,
                  global_batch) == want)
      return s;
  int from = -1, to = -1;
  for (int i = 0; i < groups; ++i) {
    if (from < 0 && now[i] > want[i]) from = i;
    if (to < 0 && now[i] < want[i]) to = i;
  }
  if (from < 0 || to < 0) return -1;
  return 2 + groups + from * (groups - 1) + (to < from ? to : to - 1);
}

std::optional<Plan> admitted_with_shares(const TrainingRun& run, const Plan& trial) {
  if (plan_fits(run, trial)) return trial;
  const int n = static_cast<int>(trial.pipeline.shares.size());
  if (n == 0) return std::nullopt;
  const int g = run.cluster().world_size() / std::max(1, trial.stages()) / n;
  if (g < 1) return std::nullopt;
  const StrategyCatalog& catalog = run.catalog();
  Plan narrowed = trial;
  bool changed = false;
  for (int b = 0; b < narrowed.size(); ++b) {
    if (g % narrowed.blocks[b].degree() == 0) continue;
    const auto& shape = catalog.shape_mask(ModelSpec::block_kind(b));
    int best = -1;
    for (int k = 0; k < catalog.size(); ++k) {
      const int d = catalog.at(k).degree();
      if (shape[k] && g % d == 0 && (best < 0 || d > catalog.at(best).degree())) best = k;
    }
    if (best < 0) return std::nullopt;
    narrowed.blocks[b] = catalog.at(best);
    changed = true;
  }
  if (changed && plan_fits(run, narrowed)) return narrowed;
  return std::nullopt;
}

bool share_choice_admissible(const TrainingRun& run, const Plan& trial) {
  return admitted_with_shares(run, trial).has_value();
}

}  // namespace shardgym
