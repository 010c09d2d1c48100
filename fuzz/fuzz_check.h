// FUZZ_CHECK: a property a harness asserts. A failure prints what was parsed and aborts, so
// libFuzzer saves the input as a crash (assert() would vanish under NDEBUG).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, what)                                                           \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  %s\n", __FILE__, __LINE__, \
                   #cond, std::string(what).c_str());                                    \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
