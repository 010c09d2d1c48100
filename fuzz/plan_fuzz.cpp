// Plan::parse and Pipeline::parse on arbitrary text. The first byte picks the model's block
// count (1..256, odd counts included), the rest is the plan. Expected errors are
// std::invalid_argument (plan.h); anything else escapes and libFuzzer reports it.
// For every plan that parses: it has num_blocks blocks, parse(to_string(p)) == p and prints
// the same again, block_stages() gives one stage per block, and validate() against a model of
// that many blocks returns (a reason or "") without crashing. Pipelines likewise.
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_check.h"
#include "runtime/core/plan.h"

using shardgym::Pipeline;
using shardgym::Plan;

namespace {

void check_pipeline(const std::string& text) {
  Pipeline p;
  try {
    p = Pipeline::parse(text);
  } catch (const std::invalid_argument&) {
    return;
  }
  const std::string printed = p.to_string();
  Pipeline back;
  try {
    back = Pipeline::parse(printed);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(false, "'" + printed + "' does not parse back: " + e.what());
  }
  FUZZ_CHECK(back == p, "'" + text + "' -> '" + printed + "' -> '" + back.to_string() + "'");
  FUZZ_CHECK(back.to_string() == printed, printed);
  for (int layers : {1, 7, 24}) {
    const auto per = p.layers_per_stage(layers);
    FUZZ_CHECK(static_cast<int>(per.size()) == p.stages || !p.split.empty(), printed);
  }
}

void check_plan(const std::string& text, int num_blocks) {
  Plan p;
  try {
    p = Plan::parse(text, num_blocks);
  } catch (const std::invalid_argument&) {
    return;
  }
  FUZZ_CHECK(p.size() == num_blocks, text);
  const std::string printed = p.to_string();
  Plan back;
  try {
    back = Plan::parse(printed, num_blocks);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(false, "'" + printed + "' does not parse back: " + e.what());
  }
  FUZZ_CHECK(back == p, "'" + text + "' -> '" + printed + "' -> '" + back.to_string() + "'");
  FUZZ_CHECK(back.to_string() == printed, printed);
  FUZZ_CHECK(static_cast<int>(p.block_stages().size()) == num_blocks, printed);
  if (num_blocks % 2 == 0) {
    shardgym::ModelSpec model;
    model.layers = num_blocks / 2;
    model.hidden = 1024;
    model.heads = 16;
    model.seq = 512;
    model.micro_batch = 2;
    model.global_batch = 64;
    for (int world : {1, 8, 12}) (void)p.validate(model, world);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int num_blocks = 1 + data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  check_plan(text, num_blocks);
  check_pipeline(text);
  return 0;
}
