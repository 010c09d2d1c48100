// SimCostShare: the indexes of the shared tables, and the check of the runs that join.
#include "runtime/sim/cost_share.h"

#include <stdexcept>
#include <utility>

#include "runtime/core/catalog.h"

namespace shardgym {

std::shared_ptr<SimCostShare> new_sim_cost_share() { return std::make_shared<SimCostShare>(); }

void SimCostShare::admit(Origin o) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!joined_) {
    joined_ = true;
    origin_ = std::move(o);
    return;
  }
  auto differ = [](const std::string& what) {
    throw std::invalid_argument("SimOptions::costs: this run differs from the first in " + what +
                                "; only runs built from the same spec share costs");
  };
  const Origin& s = origin_;
  if (s.blocks != o.blocks || s.world != o.world || s.model != o.model) differ("model or world");
  if (s.catalog != o.catalog) differ("catalog");
  // The share is for the siblings of one spec: runs of other instances of a task (other
  // events) are kept apart, though the tables are keyed by content.
  if (s.events != o.events) differ("scenario events");
  if (s.act_keys != o.act_keys || s.param_keys != o.param_keys) differ("layouts");
  if (s.probe != o.probe) differ("cluster, calibration or cost terms (its costs)");
}

std::shared_ptr<PriceRows> SimCostShare::find_rows(const std::vector<double>& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : it->second;
}

std::shared_ptr<PriceRows> SimCostShare::add_rows(std::vector<double> key,
                                                  std::shared_ptr<PriceRows> made) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rows_.size() >= kMaxRows && rows_.find(key) == rows_.end()) rows_.clear();
  return rows_.emplace(std::move(key), std::move(made)).first->second;
}

TransferTables& SimCostShare::transfers(std::vector<double> key, int stages, int act, int param) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<TransferTables>& t = transfers_[std::move(key)];
  if (!t) t = std::make_unique<TransferTables>(stages, act, param);
  return *t;
}

std::vector<double> cost_probe(const CostModel& cost, const std::vector<Strategy>& catalog,
                               int world) {
  const HeadCost h = cost.head_cost();
  std::vector<double> out = {h.compute_s, h.grad_sync_s, h.memory_bytes, h.idle_power_w,
                             h.host_s,    h.loop_host_s, h.iteration_s,  h.memory_capacity};
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    std::vector<Strategy> probed = {Strategy::dp()};
    for (auto it = catalog.rbegin(); it != catalog.rend(); ++it)
      if (strategy_invalid_reason(*it, cost.model(), kind, world).empty()) {
        probed.push_back(*it);
        break;
      }
    for (const Strategy& st : probed) {
      const BlockCost b = cost.block_cost(kind, st);
      for (double v : {b.fwd_s, b.bwd_s, b.comm_s, b.grad_sync_s, b.optimizer_s, b.host_s,
                       b.state_bytes, b.activation_bytes})
        out.push_back(v);
    }
  }
  return out;
}

}  // namespace shardgym
