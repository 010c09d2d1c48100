#include "agents/agent_util.h"

#include <cstring>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <string>

#include "env/pipeline_action.h"
#include "env/share_action.h"
#include "runtime/core/cost.h"

namespace shardgym::agents_detail {

int pipeline_moves(const EnvSpec& spec) {
  return plan_component_choices(spec.pipeline_stages, spec.share_groups);
}

int plan_choice_toward(Env& env, const Plan& target) {
  const EnvSpec& spec = env.spec();
  const TrainingRun& run = env.run();
  const Plan& now = run.plan();
  // The stage boundaries first (one layer per step), then the shares.
  if (now.stages() > 1) {
    Pipeline from = now.pipeline, to = target.pipeline;
    from.shares.clear(), to.shares.clear();
    const int c = pipeline_choice_toward(from, to, run.model().layers);
    if (c > 0) return c;
  }
  if (spec.share_groups <= 0) return 0;
  if (now.pipeline.shares == target.pipeline.shares) return 0;
  const int world = run.cluster().world_size();
  const RunContext ctx = run.context();
  const std::vector<double> speeds = share_group_speeds(spec.share_groups, run.cluster(), now.stages(),
                                                        ctx.rank_slowdown, ctx.rank_alive);
  const int s = share_choice_toward(now.pipeline.shares, target.pipeline.shares,
                                    spec.share_groups,
                                    effective_global_batch(run.model(), world), speeds);
  return s < 0 ? 0 : share_choice_offset(spec.pipeline_stages) + s;
}

std::vector<std::vector<int>> allowed_entries(const std::vector<uint8_t>& mask, int blocks,
                                              int catalog, int moves) {
  if (static_cast<int64_t>(mask.size()) != static_cast<int64_t>(blocks) * catalog + moves)
    throw std::invalid_argument("action mask has " + std::to_string(mask.size()) +
                                " entries, expected blocks*catalog" +
                                (moves > 0 ? " + pipeline moves" : "") + " = " +
                                std::to_string(blocks) + "*" + std::to_string(catalog) +
                                (moves > 0 ? " + " + std::to_string(moves) : ""));
  std::vector<std::vector<int>> out(blocks);
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < catalog; ++k)
      if (mask[static_cast<size_t>(b) * catalog + k]) out[b].push_back(k);
  return out;
}

std::vector<int> allowed_moves(const std::vector<uint8_t>& mask, int blocks, int catalog) {
  std::vector<int> out;
  const size_t first = static_cast<size_t>(blocks) * catalog;
  for (size_t c = first; c < mask.size(); ++c)
    if (mask[c]) out.push_back(static_cast<int>(c - first));
  return out;
}

bool action_allowed(const Action& a, const std::vector<uint8_t>& mask, int catalog) {
  size_t blocks = a.size();
  if (blocks * catalog != mask.size()) {
    // B blocks and a pipeline choice: the mask has B·K entries and then the choices.
    if (blocks == 0 || (blocks - 1) * catalog >= mask.size()) return false;
    --blocks;
    const int32_t c = a.back();
    if (c < 0 || (blocks * catalog + c) >= mask.size() || !mask[blocks * catalog + c])
      return false;
  }
  for (size_t b = 0; b < blocks; ++b) {
    if (a[b] < 0 || a[b] >= catalog) return false;
    if (!mask[b * catalog + a[b]]) return false;
  }
  return true;
}

Action current_action(const std::vector<int32_t>& plan, int blocks) {
  if (blocks < 0 || plan.size() < static_cast<size_t>(blocks))
    throw std::invalid_argument("the plan in force has " + std::to_string(plan.size()) +
                                " catalog indices, fewer than the " + std::to_string(blocks) +
                                " blocks");
  return Action(plan.begin(), plan.begin() + blocks);
}

Action respect_mask(const Action& wanted, const Action& current, const std::vector<uint8_t>& mask,
                    int catalog) {
  Action out(wanted.size());
  auto ok = [&](size_t b, int k) { return k >= 0 && k < catalog && mask[b * catalog + k]; };
  const size_t blocks = current.size();
  if (wanted.size() > blocks) {
    const size_t at = blocks * static_cast<size_t>(catalog) + wanted[blocks];
    out[blocks] = wanted[blocks] > 0 && at < mask.size() && mask[at] ? wanted[blocks] : 0;
  }
  for (size_t b = 0; b < blocks && b < wanted.size(); ++b) {
    if (ok(b, wanted[b])) {
      out[b] = wanted[b];
    } else if (ok(b, current[b])) {
      out[b] = current[b];
    } else {
      out[b] = current[b];
      for (int k = 0; k < catalog; ++k)
        if (ok(b, k)) {
          out[b] = k;
          break;
        }
    }
  }
  return out;
}

int uniform_int(std::mt19937_64& rng, int n) {
  if (n <= 0) throw std::invalid_argument("uniform_int: empty range");
  const uint64_t range = static_cast<uint64_t>(n);
  // Rejection sampling on the top bits: unbiased and identical on every platform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return static_cast<int>(x % range);
}

double uniform_real(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

void write_rng(std::ostream& out, const std::mt19937_64& rng) { out << rng << '\n'; }

void read_rng(std::istream& in, std::mt19937_64& rng) {
  in >> rng;
  if (!in) throw std::runtime_error("agent load: bad rng state");
}

void write_double(std::ostream& out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  out << bits << '\n';
}

double read_double(std::istream& in) {
  uint64_t bits = 0;
  if (!(in >> bits)) throw std::runtime_error("agent load: bad number in saved state");
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

int64_t read_int(std::istream& in, int64_t lo, int64_t hi, const char* what) {
  int64_t v = 0;
  if (!(in >> v))
    throw std::runtime_error(std::string("bad integer in saved state (") + what + ")");
  if (v < lo || v > hi)
    throw std::runtime_error(std::string("saved ") + what + " " + std::to_string(v) +
                             " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "] for this agent's config");
  return v;
}

double read_reward(std::istream& in, const char* what) {
  const double v = read_double(in);
  if (std::isinf(v))
    throw std::runtime_error(std::string("saved ") + what + " is infinite");
  return v;
}

void write_action(std::ostream& out, const Action& a) {
  out << a.size();
  for (int32_t k : a) out << ' ' << k;
  out << '\n';
}

Action read_action(std::istream& in, int blocks, int catalog, const char* what) {
  const int64_t n = read_int(in, 0, blocks, what);
  if (n != 0 && n != blocks)
    throw std::runtime_error(std::string("saved ") + what + " has " + std::to_string(n) +
                             " entries; this agent's config has " + std::to_string(blocks) +
                             " blocks");
  Action a(static_cast<size_t>(n));
  for (auto& k : a) k = static_cast<int32_t>(read_int(in, 0, catalog - 1, what));
  return a;
}

}  // namespace shardgym::agents_detail
