// Small text helpers shared by the notation parsers (strategies, plans, calibration keys,
// agent ids).
#pragma once

#include <cctype>
#include <string>

namespace shardgym {

// `s` without its leading and trailing whitespace.
inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace shardgym
