#include "runtime/core/strategy_family.h"

#include <cctype>
#include <stdexcept>

namespace shardgym {

// One accessor per family file (family_dp.cpp, family_tp1d.cpp, family_tp2d.cpp).
const StrategyFamily& dp_family();
const StrategyFamily& tp1d_family();
const StrategyFamily& tp2d_family();

const std::vector<const StrategyFamily*>& strategy_families() {
  static const std::vector<const StrategyFamily*> all = {&dp_family(), &tp1d_family(),
                                                         &tp2d_family()};
  return all;
}

const StrategyFamily* family_named(const std::string& name) {
  for (const StrategyFamily* f : strategy_families())
    if (name == f->name()) return f;
  return nullptr;
}

void add_collective(std::vector<Collective>& out, CollOp op, CommAxis axis, int group, double x,
                    bool fwd, const char* what, int chunks, bool under_wgrad) {
  if (group <= 1 || x <= 0) return;
  for (int c = 0; c < chunks; ++c) out.push_back({op, axis, group, x / chunks, fwd, what, under_wgrad});
}

void StrategyText::fail(const std::string& why) const {
  throw std::invalid_argument("bad strategy '" + text + "': " + why +
                              " (expected e.g. dp, tp1d(t=4), tp1d(t=4,sp=1), "
                              "tp2d(d1=2,d2=4,first=row), with optional chunks=k, recompute=1|sel; tp1d also heads=n/n/...)");
}

int StrategyText::parse_int(const std::string& key, const std::string& value) const {
  if (value.empty()) fail(key + " has no value");
  for (char c : value)
    if (!std::isdigit(static_cast<unsigned char>(c))) fail(key + "=" + value + " is not a positive integer");
  if (value.size() > 6) fail(key + "=" + value + " is too large");
  return std::stoi(value);
}

bool StrategyText::parse_flag(const std::string& key, const std::string& value) const {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  fail(key + "=" + value + " must be 0 or 1");
}

void StrategyFamily::require(const std::vector<std::string>&, const StrategyText&) const {}

bool StrategyFamily::parse_option(Strategy&, const std::string&, const std::string&,
                                  StrategyText&) const {
  return false;
}

void StrategyFamily::finish(Strategy&, const StrategyText&) const {}

void StrategyFamily::print(const Strategy&, std::vector<std::string>&) const {}

}  // namespace shardgym
