// IncrementalAction: the "change one block or do nothing" form of the action (docs/design.md §5).
//
// Action space Discrete(1 + B·K + M), an action is a one-element vector {a}:
//   a = 0                no-op: the plan in force is kept
//   a = 1 + b·K + k      block b takes catalog entry k, every other block keeps its strategy
//   a = 1 + B·K + j      pipeline choice j + 1 (a boundary move, pipeline_action.h), blocks kept
// M = 2(p − 1) boundary moves with p > 1 pipeline stages, else 0. The mask has 1 + B·K + M
// entries: mask[0] = 1, mask[1 + b·K + k] = inner mask[b·K + k], mask[1 + B·K + j] = inner
// mask[B·K + 1 + j].
// The plan in force is read back from the run after each step, so the wrapper never drifts
// from the job; a plan with a strategy outside the catalog cannot be expressed and throws.
#pragma once

#include <memory>

#include "env/wrappers.h"

namespace shardgym {

class IncrementalAction : public Wrapper {
 public:
  explicit IncrementalAction(std::unique_ptr<Env> inner);

  const EnvSpec& spec() const override { return spec_; }
  ResetResult reset(std::optional<uint64_t> seed = std::nullopt) override;
  // Throws std::invalid_argument for an index outside [0, 1 + B·K + M) or a masked change.
  void step_into(const Action& action, StepResult& out) override;
  void action_mask_into(uint8_t* out, size_t size) const override;

  // The per-block action the inner env receives for `action` (current plan + one change).
  Action expand(const Action& action) const;

 private:
  void sync_current();

  EnvSpec spec_;
  int blocks_ = 0, choices_ = 0, moves_ = 0;  // moves_: M
  Action current_;  // catalog index per block of the plan in force (then pipeline choice 0)
};

}  // namespace shardgym
