// PPO checkpoints (agents/ppo_checkpoint_check.h, agents/checkpoint_file.h) on arbitrary
// bytes: the record container's parse and every check against the config, which is all the
// code that reads the file (agents/ppo_checkpoint.cpp then only copies checked records into
// tensors of the shapes checked here; LibTorch is not in the fuzz build). The first byte
// picks a layout (without or with plan rows, with or without a pipeline row); the rest is
// the file, capped at the layout's size as PPO::load caps it. Expected errors are
// std::runtime_error. For every file that passes: each record has the layout's shape, every
// action entry lies in its row's range, the arrays agree with the rollout's length, and one
// encode/decode round changes nothing.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "agents/checkpoint_file.h"
#include "agents/ppo_checkpoint_check.h"
#include "fuzz/fuzz_check.h"

using namespace shardgym;
using namespace shardgym::ppo_detail;

namespace {

// A 4-block policy over a catalog of 6 (hidden 8) with 4 global features; the parameter
// names and shapes of agents/ppo_net.cpp's layers for it.
CheckpointLayout layout(bool plan, bool pipeline) {
  CheckpointLayout l;
  l.blocks = 4;
  l.catalog = 6;
  l.moves = pipeline ? 3 : 0;
  l.obs_dim = 4 * 10 + 8 + l.moves;
  l.rows = l.blocks + (pipeline ? 1 : 0) + (plan ? 3 : 0);
  l.plan_row = plan ? l.blocks + (pipeline ? 1 : 0) : -1;
  l.hidden = 8;
  l.rollout = 8;
  l.conditions = 4;
  l.params = {{"enc1.weight", {8, 21}}, {"enc1.bias", {8}}, {"enc2.weight", {8, 8}},
              {"enc2.bias", {8}},       {"pi.weight", {6, 8}}, {"pi.bias", {6}},
              {"keep_bias", {pipeline ? 3 : 2}}};
  if (pipeline) l.params.push_back({"pi_pp.weight", {3, 16}});
  if (plan) l.params.push_back({"pi_plan.weight", {12, 5}});
  l.generator_bytes = 16;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const CheckpointLayout l = layout(data[0] & 1, data[0] & 2);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (bytes.size() > l.max_bytes()) return 0;  // read_regular_file refuses it unread
  checkpoint::RecordFile f;
  CheckpointContents c;
  try {
    f = checkpoint::RecordFile::decode(bytes, "fuzz", l.max_records());
    c = check_checkpoint(f, l, "fuzz");
  } catch (const std::runtime_error&) {
    return 0;
  }
  FUZZ_CHECK(c.params.size() == l.params.size(), "every parameter");
  for (size_t i = 0; i < l.params.size(); ++i)
    FUZZ_CHECK(c.params[i]->shape == l.params[i].second, l.params[i].first);
  for (const auto& m : c.moments) {
    FUZZ_CHECK(m.param < l.params.size(), "moment's parameter");
    FUZZ_CHECK(m.avg->shape == l.params[m.param].second, "moment's shape");
  }
  const size_t n = c.value.size();
  FUZZ_CHECK(n <= static_cast<size_t>(l.rollout), "rollout length");
  FUZZ_CHECK(c.obs.size() == n * l.obs_dim && c.act.size() == n * l.rows, "rollout arrays");
  for (size_t i = 0; i < c.act.size(); ++i)
    FUZZ_CHECK(c.act[i] >= 0 && c.act[i] < (l.catalog > 3 ? l.catalog : 3), "action entry");
  for (int32_t e : c.sub) FUZZ_CHECK(e >= 0 && e < l.catalog, "substitution entry");
  FUZZ_CHECK(c.generator->data.size() == static_cast<size_t>(l.generator_bytes), "generator");
  const std::string once = f.encode();
  FUZZ_CHECK(checkpoint::RecordFile::decode(once, "again", l.max_records()).encode() == once,
             "round trip");
  return 0;
}
