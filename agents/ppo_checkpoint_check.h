// The checks of a PPO record checkpoint against the agent's config, without LibTorch
// (agents/ppo_checkpoint.cpp installs what passes; fuzz/ppo_checkpoint_fuzz.cpp runs these on
// arbitrary bytes). Every record's dtype and shape, every count against the config (the
// rollout at most `rollout` rows), every
// action entry against its row's range, every float finite: nothing of the file is used
// before all of it passed (docs/robustness.md, "Checkpoints").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agents/checkpoint_file.h"

namespace shardgym::ppo_detail {

inline constexpr int64_t kCheckpointVersion = 4;  // 1–3: TorchScript archives, refused
inline constexpr const char* kCheckpointKind = "ppo";

// What the agent's config builds: the network's parameters (name, shape) and the sizes.
struct CheckpointLayout {
  int blocks = 0, catalog = 0, moves = 0, obs_dim = 0, rows = 0, plan_row = -1, hidden = 0;
  int rollout = 1;
  size_t conditions = 0;  // the run's conditions (the plan rows' input)
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  int64_t generator_bytes = 0;
  // The largest file this layout can produce.
  size_t max_bytes() const;
  size_t max_records() const { return 4 * params.size() + 32; }
};

// A checkpoint that passed every check (pointers into the RecordFile).
struct CheckpointContents {
  int updates = 0;
  int64_t env_steps = 0;
  bool pending = false, have_next = false;
  std::vector<const checkpoint::Record*> params;  // in layout order
  struct Moments {
    size_t param;
    int64_t step;
    const checkpoint::Record *avg, *sq;
  };
  std::vector<Moments> moments;
  const checkpoint::Record* generator = nullptr;
  std::vector<float> obs, logp, value, reward;
  std::vector<uint8_t> mask, done;
  std::vector<int64_t> act;
  std::vector<float> pending_obs, pending_logp, next_obs;
  float pending_value = 0;
  std::vector<uint8_t> pending_mask;
  std::vector<int64_t> pending_act;
  // norm_reward's statistics (agents/return_scale.h): mean, variance, count and the return
  // of the agent-API episode; empty in a checkpoint written before they were saved.
  std::vector<double> reward_scale;
};

// The header's plan-rows flag (plan=alt picks the layout by it); throws on a bad header.
bool checkpoint_has_plan_rows(const checkpoint::RecordFile& f, const std::string& where);
// Throws std::runtime_error naming `where` and the record at the first thing that does not fit.
CheckpointContents check_checkpoint(const checkpoint::RecordFile& f, const CheckpointLayout& l,
                                    const std::string& where);

}  // namespace shardgym::ppo_detail
