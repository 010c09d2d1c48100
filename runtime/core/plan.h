// Plan: one Strategy per block (2·layers blocks).
//
// Text forms (configs, CLI `--plan`, traces):
//   uniform:tp1d(t=8)                 every block the same
//   tp1d(t=8);tp2d(d1=2,d2=4,first=row);...   exactly num_blocks entries, ';'-separated
//   24*tp1d(t=8);24*dp                 `K*S` repeats S K times (counts must add up)
//   attn=tp1d(t=8)|mlp=tp2d(d1=2,d2=4,first=col)   every attention / every MLP block
#pragma once

#include <string>
#include <vector>

#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"

namespace shardgym {

struct Plan {
  std::vector<Strategy> blocks;

  int size() const { return static_cast<int>(blocks.size()); }
  // Shortest text form that parses back to this plan.
  std::string to_string() const;
  // Throws std::invalid_argument (wrong count, bad strategy: says which entry).
  static Plan parse(const std::string& text, int num_blocks);
  static Plan uniform(const Strategy& s, int num_blocks);

  // Empty when every block is shape-valid for the model and world, else the first problem.
  std::string validate(const ModelSpec& model, int world) const;

  bool operator==(const Plan& o) const { return blocks == o.blocks; }
  bool operator!=(const Plan& o) const { return !(*this == o); }
};

}  // namespace shardgym
