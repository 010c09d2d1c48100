// Strategy::parse on arbitrary text. Expected errors are std::invalid_argument (the header's
// contract); any other exception escapes and libFuzzer reports it. For every strategy that
// parses: parse(to_string(s)) == s, the strategy's degree is ≥ 1 and replicas() is defined.
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_check.h"
#include "runtime/core/strategy.h"

using shardgym::Strategy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Strategy s;
  try {
    s = Strategy::parse(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::string printed = s.to_string();
  Strategy back;
  try {
    back = Strategy::parse(printed);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(false, "'" + printed + "' does not parse back: " + e.what());
  }
  FUZZ_CHECK(back == s, "'" + text + "' -> '" + printed + "' -> '" + back.to_string() + "'");
  FUZZ_CHECK(back.to_string() == printed, printed);
  FUZZ_CHECK(s.degree() >= 1, printed);
  FUZZ_CHECK(s.replicas(1 << 20) >= 0, printed);
  return 0;
}
