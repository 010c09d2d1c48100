// StrategyCatalog: the finite menu of strategies a block may take, for one model and world.
//
// Every block indexes the same list (so the action space is MultiDiscrete with one nvec);
// what differs per block is the validity mask: divisibility by the block's shapes
// (heads, hidden, ffn, seq) and, when a memory budget is given, whether it fits.
// Invalid entries are masked, never coerced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"

namespace shardgym {

struct CatalogOptions {
  bool with_sp = true;
  bool with_2d = true;
  std::vector<int> chunks = {1, 2};
  bool with_recompute = true;
  int max_degree = 0;  // 0 = world
  // Uneven tensor-parallel shards (strategy.h heads=): for every tp1d entry of degree
  // 2 ≤ t ≤ this, t more entries, "position i light": rank i of each tensor group holds about
  // half an even share of the heads, max(1, ⌊heads / 2t⌋), and the others split the rest as
  // evenly as whole heads allow (the extra heads to the lowest positions). 0 = none. A GPU at
  // half speed (hardware slowdown: clocks cut "by a factor of 2 or more", nvidia-smi's
  // clocks_throttle_reasons.hw_slowdown) then keeps pace; a finer split is not offered.
  int uneven_heads_max_degree = 0;
  // Pipeline stages the static baselines ("megatron", "megatron-sp", "atp", also as the
  // initial plan) may add until the model fits memory (training_run.h). 1 = never pipeline.
  // Not a catalog entry: the env's pipeline comes from the initial plan.
  int max_pipeline_stages = 1;
};

class StrategyCatalog {
 public:
  StrategyCatalog() = default;
  StrategyCatalog(const ModelSpec& model, int world, CatalogOptions options = {});

  int size() const { return static_cast<int>(entries_.size()); }
  const Strategy& at(int index) const { return entries_.at(index); }
  const std::vector<Strategy>& entries() const { return entries_; }
  int index_of(const Strategy& s) const;  // -1 if absent
  int world() const { return world_; }

  // Shape validity of entry `index` for a block kind; empty when valid, else the reason.
  std::string why_invalid(BlockKind kind, int index) const;
  // 1 = shape-valid for that block kind (memory is checked by the run, which knows the plan).
  const std::vector<uint8_t>& shape_mask(BlockKind kind) const;

 private:
  ModelSpec model_;
  int world_ = 1;
  std::vector<Strategy> entries_;
  std::vector<uint8_t> mask_attention_, mask_mlp_;
};

// The "position i light" head split of a tensor group of t ranks over `heads` heads (see
// CatalogOptions::uneven_heads_max_degree); empty when it would be even or cannot be made
// (heads < t, or not enough heads to lighten one rank).
std::vector<int> light_position_heads(int heads, int t, int i);

// Shape-validity of any strategy (also outside a catalog): empty when valid.
std::string strategy_invalid_reason(const Strategy& s, const ModelSpec& model, BlockKind kind,
                                    int world);

}  // namespace shardgym
