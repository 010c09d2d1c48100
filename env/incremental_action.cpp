#include "env/incremental_action.h"

#include <algorithm>
#include <stdexcept>

#include "env/pipeline_action.h"
#include "env/share_action.h"
#include "runtime/core/training_run.h"

namespace shardgym {

IncrementalAction::IncrementalAction(std::unique_ptr<Env> inner) : Wrapper(std::move(inner)) {
  spec_ = inner_->spec();
  blocks_ = spec_.num_blocks;
  choices_ = spec_.catalog_size;
  if (blocks_ <= 0 || choices_ <= 0) {
    throw std::invalid_argument("IncrementalAction(" + spec_.id +
                                "): the inner env has no blocks or an empty catalog");
  }
  moves_ = std::max(0, plan_component_choices(spec_.pipeline_stages, spec_.share_groups) - 1);
  spec_.action_space = Space::discrete("incremental_action",
                                       1 + static_cast<int64_t>(blocks_) * choices_ + moves_);
  current_.assign(blocks_ + (moves_ > 0 ? 1 : 0), 0);
}

void IncrementalAction::sync_current() {
  const Plan& plan = run().plan();
  const StrategyCatalog& catalog = run().catalog();
  if (plan.size() != blocks_) {
    throw std::logic_error("IncrementalAction(" + spec_.id + "): the run's plan has " +
                           std::to_string(plan.size()) + " blocks, expected " +
                           std::to_string(blocks_));
  }
  for (int b = 0; b < blocks_; ++b) {
    const int k = current_[b];
    if (k >= 0 && k < choices_ && catalog.at(k) == plan.blocks[b]) continue;  // unchanged
    const int idx = catalog.index_of(plan.blocks[b]);
    if (idx < 0) {
      throw std::invalid_argument("IncrementalAction(" + spec_.id + "): block " +
                                  std::to_string(b) + " runs " + plan.blocks[b].to_string() +
                                  ", which is not in the catalog");
    }
    current_[b] = idx;
  }
}

ResetResult IncrementalAction::reset(std::optional<uint64_t> seed) {
  ResetResult r = inner_->reset(seed);
  sync_current();
  return r;
}

Action IncrementalAction::expand(const Action& action) const {
  const int64_t n = 1 + static_cast<int64_t>(blocks_) * choices_ + moves_;
  if (action.size() != 1 || action[0] < 0 || action[0] >= n) {
    throw std::invalid_argument("IncrementalAction::step(" + spec_.id +
                                "): expected one index in [0, " + std::to_string(n) + ")" +
                                (action.size() == 1 ? ", got " + std::to_string(action[0])
                                                    : ", got " + std::to_string(action.size()) +
                                                          " entries"));
  }
  Action full = current_;
  const int flat = action[0] - 1;
  if (flat >= blocks_ * choices_) {
    full[blocks_] = flat - blocks_ * choices_ + 1;
  } else if (flat >= 0) {
    full[flat / choices_] = flat % choices_;
  }
  return full;
}

void IncrementalAction::step_into(const Action& action, StepResult& out) {
  inner_->step_into(expand(action), out);
  sync_current();
}

void IncrementalAction::action_mask_into(uint8_t* out, size_t size) const {
  const std::vector<uint8_t> inner = inner_->action_mask();
  const size_t k = static_cast<size_t>(choices_);
  // A change of one block keeps the others; that is only valid while their current entries
  // are still allowed (conditions may have changed since they were chosen).
  int disallowed = 0, bad_block = -1;
  for (int b = 0; b < blocks_; ++b) {
    if (!inner[b * k + current_[b]]) {
      ++disallowed;
      bad_block = b;
    }
  }
  const size_t want = 1 + blocks_ * k + static_cast<size_t>(moves_);
  if (size != want)
    throw std::logic_error("IncrementalAction(" + spec_.id + "): action mask of " +
                           std::to_string(want) + " entries, expected " + std::to_string(size));
  uint8_t* mask = out;
  std::fill(mask, mask + size, uint8_t{0});
  mask[0] = disallowed == 0 ? 1 : 0;
  for (int b = 0; b < blocks_; ++b) {
    if (disallowed > 1 || (disallowed == 1 && b != bad_block)) continue;
    for (size_t c = 0; c < k; ++c) mask[1 + b * k + c] = inner[b * k + c] != 0;
  }
  // A boundary move keeps every block, so like the no-op it needs their entries allowed.
  for (int j = 0; j < moves_ && disallowed == 0; ++j)
    mask[1 + blocks_ * k + j] = inner[blocks_ * k + 1 + j] != 0;
}

}  // namespace shardgym
