// The pipeline part of the action and observation (docs/design.md §3, §5): with p > 1 stages, the
// action gets one trailing component after the B block components.
//
//   choice 0        keep the stage boundaries
//   choice 1 + 2i   boundary i (between stages i and i+1) one layer earlier: stage i hands its
//                   last layer (attention and MLP block) to stage i+1
//   choice 2 + 2i   boundary i one layer later: stage i+1 hands its first layer to stage i
//
// so the component has 2p − 1 choices. The number of stages, m and the schedule stay as the
// initial plan has them: changing p would change the shape of the action. A move that empties
// a stage, breaks the schedule (interleaved: layers per stage divisible by v) or does not fit
// memory is masked. With p = 1 there is no such component: the action is as before pipelines.
//
// The observation ends with the pipeline part when p > 1 (PartitionEnv): the p − 1 boundaries
// as first layer of stage i+1 / layers, then each stage's peak memory / capacity.
#pragma once

#include <vector>

#include "runtime/core/plan.h"

namespace shardgym {

// 2p − 1 for p > 1 stages, 0 (no component) for p = 1.
int pipeline_choices(int stages);
// `pipe` after `choice`; throws std::out_of_range for a choice outside [0, 2p − 1).
Pipeline apply_pipeline_choice(const Pipeline& pipe, int choice, int layers);
// The choice that brings `from`'s split one move closer to `to`'s: the first boundary that
// differs. 0 when the splits match or the pipelines differ in more than the split.
int pipeline_choice_toward(const Pipeline& from, const Pipeline& to, int layers);

}  // namespace shardgym
