// PPO checkpoints (agents/ppo_checkpoint_check.h, agents/checkpoint_file.h) on arbitrary
// bytes: the record container's parse and every check against the config, which is all the
// code that reads the file (agents/ppo_checkpoint.cpp then only copies checked records into
// tensors of the shapes checked here; LibTorch is not in the fuzz build). The first byte
// picks a layout (bit 0: plan rows, bit 1: a pipeline row; bit 2: see below); the rest is
// the file, capped at the layout's size as PPO::load caps it. Expected errors are
// std::runtime_error. For every file that passes: each record has the layout's shape, every
// action entry lies in its row's range, the arrays agree with the rollout's length, and one
// encode/decode round changes nothing.
#include <cstdint>
#include <cstdlib>
#include <fstream>
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

// SHARDGYM_FUZZ_WRITE_SEEDS=DIR: writes the seed corpus (fuzz/corpus/ppo_checkpoint_fuzz/):
// for each layout a file that passes every check, with a rollout of two steps, a pending
// step, Adam moments for one parameter and one polish key.
void write_seeds(const std::string& dir) {
  using checkpoint::Elem;
  for (int sel = 0; sel < 4; ++sel) {
    const CheckpointLayout l = layout(sel & 1, sel & 2);
    checkpoint::RecordFile f;
    f.kind = kCheckpointKind;
    const std::vector<int64_t> header = {kCheckpointVersion, l.blocks, l.catalog, l.obs_dim,
                                         l.hidden, 3, 24, 1, 1, l.plan_row >= 0};
    f.put("header", Elem::kI64, {10}, header.data());
    for (const auto& [name, shape] : l.params) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const std::vector<float> w(n, 0.25f);
      f.put("net/" + name, Elem::kF32, shape, w.data());
      if (name == "pi.bias") {
        const int64_t step = 3;
        f.put("adam/" + name + "/step", Elem::kI64, {1}, &step);
        f.put("adam/" + name + "/exp_avg", Elem::kF32, shape, w.data());
        f.put("adam/" + name + "/exp_avg_sq", Elem::kF32, shape, w.data());
      }
    }
    const std::vector<uint8_t> gen(l.generator_bytes, 1);
    f.put("generator", Elem::kU8, {l.generator_bytes}, gen.data());
    const int64_t n = 2, D = l.obs_dim, R = l.rows, M = int64_t(l.blocks) * l.catalog + l.moves;
    const std::vector<float> obs(n * D, 0.5f), logp(n * R, -1.0f), v(n, 0.1f), one(1, 0.1f);
    const std::vector<uint8_t> mask(n * M, 1), done(n, 0);
    const std::vector<int64_t> act(n * R, 1);
    f.put("buf_obs", Elem::kF32, {n * D}, obs.data());
    f.put("buf_mask", Elem::kU8, {n * M}, mask.data());
    f.put("buf_act", Elem::kI64, {n * R}, act.data());
    f.put("buf_logp", Elem::kF32, {n * R}, logp.data());
    f.put("buf_value", Elem::kF32, {n}, v.data());
    f.put("buf_reward", Elem::kF32, {n}, v.data());
    f.put("buf_done", Elem::kU8, {n}, done.data());
    f.put("pending_obs", Elem::kF32, {D}, obs.data());
    f.put("pending_mask", Elem::kU8, {M}, mask.data());
    f.put("pending_act", Elem::kI64, {R}, act.data());
    f.put("pending_logp", Elem::kF32, {R}, logp.data());
    f.put("pending_value", Elem::kF32, {1}, one.data());
    f.put("next_obs", Elem::kF32, {D}, obs.data());
    std::ofstream(dir + "/seed-" + std::to_string(sel), std::ios::binary)
        << static_cast<char>(sel) << f.encode();
    std::ofstream(dir + "/seed-" + std::to_string(sel) + "-crcfix", std::ios::binary)
        << static_cast<char>(sel | 4) << f.encode();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool seeded = [] {
    if (const char* dir = std::getenv("SHARDGYM_FUZZ_WRITE_SEEDS")) write_seeds(dir);
    return true;
  }();
  (void)seeded;
  if (size == 0) return 0;
  const CheckpointLayout l = layout(data[0] & 1, data[0] & 2);
  std::string owned(reinterpret_cast<const char*>(data) + 1, size - 1);
  // Byte 0 bit 2: the last 4 bytes are replaced by the CRC of the rest, so that mutations
  // reach the parser and the checks behind the CRC (a mutated file almost never matches it).
  if ((data[0] & 4) && owned.size() >= 4) {
    const uint32_t crc = checkpoint::crc32(std::string_view(owned).substr(0, owned.size() - 4));
    for (int i = 0; i < 4; ++i) owned[owned.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  }
  const std::string_view bytes(owned);
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
  FUZZ_CHECK(c.generator->data.size() == static_cast<size_t>(l.generator_bytes), "generator");
  const std::string once = f.encode();
  FUZZ_CHECK(checkpoint::RecordFile::decode(once, "again", l.max_records()).encode() == once,
             "round trip");
  return 0;
}
