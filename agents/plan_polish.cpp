#include "agents/plan_polish.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>

#include "agents/evaluate.h"

namespace shardgym {
namespace {

// |log(a / b)| of two non-negative conditions (the observation's entries are ≥ 0).
double log_distance(double a, double b) { return std::abs(std::log((a + 1e-6) / (b + 1e-6))); }

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

SubstitutionTables::SubstitutionTables(const EnvSpec& spec)
    : catalog(spec.catalog_size), blocks(spec.num_blocks) {
  const ObservationPart* global = find_part(spec.observation_parts, "global");
  if (!global)
    throw std::invalid_argument("the env names no 'global' observation part (PartitionEnv layout)");
  for (int64_t i : {2, 3}) cond_index.push_back(global->offset + i);
  for (const char* name : {"links", "shares"}) {
    const ObservationPart* p = find_part(spec.observation_parts, name);
    for (int64_t i = 0; p && i < p->size(); ++i) cond_index.push_back(p->offset + i);
  }
  clear();
}

std::vector<float> SubstitutionTables::conditions(const float* obs) const {
  std::vector<float> c;
  for (int64_t i : cond_index) c.push_back(obs[i]);
  return c;
}

bool SubstitutionTables::same_conditions(const std::vector<float>& a,
                                         const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t j = 0; j < a.size(); ++j)
    if (!(log_distance(a[j], b[j]) < 0.1)) return false;
  return true;
}

int SubstitutionTables::nearest_key(const float* obs) const {
  const int n = keys();
  const size_t C = cond_index.size();
  int best = -1;
  double best_d = std::numeric_limits<double>::infinity();
  for (int k = 0; k < n; ++k) {
    double d = 0;
    for (size_t j = 0; j < C; ++j) d += log_distance(obs[cond_index[j]], key_values[k * C + j]);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

void SubstitutionTables::set_keys(const std::vector<std::vector<float>>& conds) {
  key_values.clear();
  for (const auto& c : conds) key_values.insert(key_values.end(), c.begin(), c.end());
  const size_t table = 2 * static_cast<size_t>(catalog), kept = std::min(sub.size(), table);
  sub.resize(table * (1 + conds.size()));
  for (size_t i = kept; i < sub.size(); ++i) sub[i] = static_cast<int32_t>(i % catalog);
}

void SubstitutionTables::clear() {
  sub.clear();
  set_keys({});
}

void SubstitutionTables::substitute(const float* obs, int32_t* act,
                                    const std::vector<uint8_t>& usable) const {
  auto apply = [&](int t) {
    for (int b = 0; b < blocks; ++b) {
      if (act[b] < 0 || act[b] >= catalog) continue;
      const int32_t f = sub[(static_cast<size_t>(t) * 2 + b % 2) * catalog + act[b]];
      if (usable[static_cast<size_t>(b) * catalog + f]) act[b] = f;
    }
  };
  apply(0);
  const int key = nearest_key(obs);
  if (key >= 0) apply(1 + key);
}

double polish_episode(Env& env, Agent& agent, const SubstitutionTables& tables, uint64_t seed,
                      PolishLook* look) {
  EpisodeHooks hooks;
  const int K = tables.catalog, B = tables.blocks;
  Observation before;  // the observation the step acted on: its conditions are the step's
  if (look) {
    look->held.assign(2 * (1 + tables.keys()), std::vector<uint8_t>(K, 0));
    look->allowed = look->held;
    look->conditions.clear();
    hooks.on_reset = [&](const ResetResult& r) { before = r.obs; };
    hooks.on_step = [&](const StepResult& r, const EpisodeSummary&) {
      const std::vector<float> c = tables.conditions(before.data());
      if (std::none_of(look->conditions.begin(), look->conditions.end(),
                       [&](const std::vector<float>& k) {
                         return SubstitutionTables::same_conditions(c, k);
                       }))
        look->conditions.push_back(c);
      const int held_in = 1 + tables.nearest_key(before.data());  // 0: no keys
      for (size_t b = 0; b < r.info.plan_indices.size(); ++b) {
        const int32_t e = r.info.plan_indices[b];
        if (e < 0 || e >= K) continue;
        look->held[b % 2][e] = 1;
        if (held_in > 0) look->held[2 * held_in + b % 2][e] = 1;
      }
      before = r.obs;
      if (r.terminated || r.truncated || r.obs.empty()) return;
      const int next_in = 1 + tables.nearest_key(r.obs.data());
      const std::vector<uint8_t> mask = env.action_mask();
      for (int kind = 0; kind < 2 && kind < B; ++kind)
        for (int f = 0; f < K; ++f) {
          bool all = true;
          for (int b = kind; b < B && all; b += 2) all = mask[static_cast<size_t>(b) * K + f] != 0;
          if (!all) continue;
          look->allowed[kind][f] = 1;
          if (next_in > 0) look->allowed[2 * next_in + kind][f] = 1;
        }
    };
  }
  const EpisodeSummary s = run_episode(env, agent, seed, /*learn=*/false, hooks);
  return s.failed_steps > 0 ? -std::numeric_limits<double>::infinity() : s.total_reward;
}

PolishResult polish_plans(SubstitutionTables& tables, const PolishEpisode& play, uint64_t seed_a,
                          uint64_t seed_b, double gain) {
  const int K = tables.catalog;
  std::vector<int32_t>& sub = tables.sub;
  auto beats = [&](double cand, double base) {
    return std::isfinite(cand) && cand > base + gain * std::abs(base);
  };
  PolishLook look;
  const auto t0 = std::chrono::steady_clock::now();
  PolishResult out;
  out.episodes = 1;
  double base = play(seed_a, &look);
  out.first = base;
  for (int step = 0; step < kPolishSteps; ++step) {
    std::vector<int32_t> table = sub;
    std::vector<int32_t> best_table;
    double best = -std::numeric_limits<double>::infinity();
    auto consider = [&](const std::vector<int32_t>& cand) {
      sub = cand;
      const double r = play(seed_a, nullptr);
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
    if (!beats(best, base) && tables.keys() == 0 && look.conditions.size() >= 2 &&
        look.conditions.size() <= static_cast<size_t>(kPolishMaxKeys)) {
      sub = table;
      tables.set_keys(look.conditions);  // identity tables: the policy is unchanged
      table = sub;
      base = play(seed_a, &look);  // what each condition's steps held
      ++out.episodes;
    }
    if (!beats(best, base) && tables.keys() > 0) {
      for (int t = 1; t <= tables.keys(); ++t) singles(t);
      if (!beats(best, base))
        for (int t = 1; t <= tables.keys(); ++t) pairs(t);
      keyed = true;
    }
    sub = table;
    if (!beats(best, base)) break;
    // The same gain on a second seed, or the table stays.
    const double base_b = play(seed_b, nullptr);
    sub = best_table;
    out.episodes += 2;
    if (!beats(play(seed_b, nullptr), base_b)) {
      sub = table;
      break;
    }
    base = play(seed_a, &look);
    ++out.episodes, ++out.kept;
    out.kept_keyed += keyed;
  }
  out.last = base;
  out.keys = tables.keys();
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
