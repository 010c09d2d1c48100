#include "agents/plan_polish.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <utility>

namespace shardgym {
namespace {

// Substitutions one search may keep in turn (each the best of its round). Two left
// seq-mix-corpus seed 0 at 0.949 of the oracle's return; rounds stop anyway when nothing
// gains.
constexpr int kPolishSteps = 4;
// Entries per kind whose pairs are tried when no single substitution gains: the best M of
// each kind's singles (not tuned: 8 × 8 = 64 episodes, about a tenth of a round's singles).
// Pairs matter where one kind moving alone loses and both together gain (seq-mix-corpus,
// docs/benchmarks.md "PPO across training seeds: plan rows").
constexpr size_t kPolishPairs = 8;

// Table 0 of `sub` (2 kinds × K, the table for every step) with every entry that kind's
// blocks held (held) replaced by f, wherever a decoded entry maps to it; false when nothing
// changes.
bool substituted(std::vector<int32_t>& sub, const std::vector<uint8_t>& held, int kind, int f,
                 int K) {
  bool changed = false;
  int32_t* row = sub.data() + static_cast<size_t>(kind) * K;
  for (int e = 0; e < K; ++e) {
    if (!held[e] || e == f) continue;
    for (int s = 0; s < K; ++s)
      if (row[s] == e) row[s] = f;
    row[e] = f;
    changed = true;
  }
  return changed;
}

// Table t of `sub` sending every entry of that kind to f: the plan of the kind under a key,
// whatever the policy decodes (decoding keeps the entry in force within a margin, so an
// entry-by-entry table under one key would carry a change into the next condition); false
// when it already does.
bool overridden(std::vector<int32_t>& sub, int t, int kind, int f, int K) {
  int32_t* row = sub.data() + (static_cast<size_t>(t) * 2 + kind) * K;
  if (std::all_of(row, row + K, [&](int32_t e) { return e == f; })) return false;
  std::fill(row, row + K, f);
  return true;
}

}  // namespace

PolishResult polish_plans(PolishTarget& target, uint64_t seed_a, uint64_t seed_b, double gain) {
  const int K = target.catalog();
  std::vector<int32_t>& sub = target.tables();
  auto beats = [&](double cand, double base) {
    return std::isfinite(cand) && cand > base + gain * std::abs(base);
  };
  PolishLook look;
  const auto t0 = std::chrono::steady_clock::now();
  PolishResult out;
  out.episodes = 1;
  double base = target.greedy_return(seed_a, &look);
  out.first = base;
  for (int step = 0; step < kPolishSteps; ++step) {
    std::vector<int32_t> table = sub;
    std::vector<int32_t> best_table;
    double best = -std::numeric_limits<double>::infinity();
    auto consider = [&](const std::vector<int32_t>& cand) {
      sub = cand;
      const double r = target.greedy_return(seed_a, nullptr);
      ++out.episodes;
      if (r > best) best = r, best_table = cand;
      return r;
    };
    // Table t's singles (one kind, every entry it holds → f), ranked per kind; then both
    // kinds → f. Table 0 applies at every step, table 1 + k where the conditions are key k's.
    std::vector<std::array<std::vector<std::pair<double, int>>, 2>> ranked(1 + kPolishMaxKeys);
    // Table 0 substitutes the entries held; a key's table sets its kind's entry outright.
    auto change = [&](std::vector<int32_t>& cand, int t, int kind, int f) {
      return t == 0 ? substituted(cand, look.held[kind], kind, f, K)
                    : overridden(cand, t, kind, f, K);
    };
    auto singles = [&](int t) {
      for (int kind = 0; kind < 2; ++kind)
        for (int f = 0; f < K; ++f) {
          std::vector<int32_t> cand = table;
          if (look.allowed[2 * t + kind][f] && change(cand, t, kind, f))
            ranked[t][kind].emplace_back(consider(cand), f);
        }
      for (int f = 0; f < K; ++f) {
        std::vector<int32_t> cand = table;
        if (!look.allowed[2 * t][f] || !look.allowed[2 * t + 1][f]) continue;
        const bool a = change(cand, t, 0, f), b = change(cand, t, 1, f);
        if (a || b) consider(cand);
      }
    };
    // Table t's pairs of the kinds' best singles.
    auto pairs = [&](int t) {
      for (auto& r : ranked[t]) {
        std::sort(r.begin(), r.end(), std::greater<>());
        if (r.size() > kPolishPairs) r.resize(kPolishPairs);
      }
      for (const auto& [r0, f] : ranked[t][0])
        for (const auto& [r1, g] : ranked[t][1]) {
          if (f == g) continue;  // both kinds → f: tried with the singles
          std::vector<int32_t> cand = table;
          change(cand, t, 0, f);
          change(cand, t, 1, g);
          consider(cand);
        }
    };
    singles(0);
    if (!beats(best, base)) pairs(0);
    // Then a table per condition, when nothing for all steps gains: singles, then pairs.
    bool keyed = false;
    if (!beats(best, base) && target.keys() == 0 && look.conditions.size() >= 2 &&
        look.conditions.size() <= static_cast<size_t>(kPolishMaxKeys)) {
      sub = table;
      target.set_keys(look.conditions);  // identity tables: the policy is unchanged
      table = sub;
      base = target.greedy_return(seed_a, &look);  // what each condition's steps held
      ++out.episodes;
    }
    if (!beats(best, base) && target.keys() > 0) {
      for (int t = 1; t <= target.keys(); ++t) singles(t);
      if (!beats(best, base))
        for (int t = 1; t <= target.keys(); ++t) pairs(t);
      keyed = true;
    }
    sub = table;
    if (!beats(best, base)) break;
    // The same gain on a second seed, or the table stays.
    const double base_b = target.greedy_return(seed_b, nullptr);
    sub = best_table;
    out.episodes += 2;
    if (!beats(target.greedy_return(seed_b, nullptr), base_b)) {
      sub = table;
      break;
    }
    base = target.greedy_return(seed_a, &look);
    ++out.episodes, ++out.kept;
    out.kept_keyed += keyed;
  }
  out.last = base;
  out.keys = target.keys();
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string polish_note(int updates, const PolishResult& r) {
  char keyed_part[80] = "";
  if (r.keys > 0)
    std::snprintf(keyed_part, sizeof keyed_part, " (%d of them for one of %d conditions)",
                  r.kept_keyed, r.keys);
  char line[240];
  std::snprintf(line, sizeof line,
                "polish after update %d: %d episodes in %.1f s, %d substitution%s kept%s, greedy "
                "return %.2f -> %.2f (training seed)",
                updates, r.episodes, r.wall_s, r.kept, r.kept == 1 ? "" : "s", keyed_part, r.first,
                r.last);
  return line;
}

}  // namespace shardgym
