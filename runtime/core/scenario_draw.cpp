#include "runtime/core/scenario_draw.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "runtime/core/scenario.h"

namespace shardgym {
namespace {

// A uniform double in [0, 1) from the engine's raw output (std distributions' algorithms are
// unspecified, so they could differ between standard libraries).
double unit(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// splitmix64: the stream seed of draw item `item` of `instance`.
uint64_t stream_seed(uint64_t instance, uint64_t item) {
  uint64_t z = instance * 0x9E3779B97F4A7C15ull + item + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double round_milli(double x) { return std::round(x * 1000.0) / 1000.0; }

}  // namespace

Distribution Distribution::constant(double v) {
  Distribution d;
  d.value = v;
  return d;
}

Distribution Distribution::uniform(double low, double high) {
  Distribution d;
  d.kind = Kind::kUniform;
  d.low = low;
  d.high = high;
  return d;
}

double Distribution::draw(std::mt19937_64& rng) const {
  switch (kind) {
    case Kind::kConstant: return value;
    case Kind::kUniform: return low + unit(rng) * (high - low);
    case Kind::kLogNormal: {
      const double u1 = 1.0 - unit(rng), u2 = unit(rng);  // u1 in (0, 1]
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      return std::clamp(round_milli(median * std::exp(sigma * z)), low, high);
    }
    case Kind::kChoice: {
      double total = 0;
      for (size_t i = 0; i < values.size(); ++i) total += weights.empty() ? 1.0 : weights[i];
      double u = unit(rng) * total;
      for (size_t i = 0; i < values.size(); ++i) {
        u -= weights.empty() ? 1.0 : weights[i];
        if (u < 0) return values[i];
      }
      return values.back();
    }
  }
  return value;
}

int Distribution::draw_int(std::mt19937_64& rng) const {
  if (kind == Kind::kUniform) {
    const long long lo = std::llround(low), hi = std::llround(high);
    const auto span = static_cast<unsigned long long>(hi - lo + 1);
    return static_cast<int>(lo + static_cast<long long>(unit(rng) * double(span)));
  }
  return static_cast<int>(std::llround(draw(rng)));
}

double Distribution::max_value() const {
  switch (kind) {
    case Kind::kConstant: return value;
    case Kind::kUniform:
    case Kind::kLogNormal: return high;
    case Kind::kChoice: return *std::max_element(values.begin(), values.end());
  }
  return value;
}

long long EventDraw::max_events() const {
  if (is_ramp()) return levels + 1LL;
  size_t group = 1;
  for (const auto& g : rank_groups) group = std::max(group, g.size());
  return std::llround(count.max_value()) * 2LL * static_cast<long long>(group);
}

void draw_events(const std::vector<EventDraw>& draws, uint64_t instance,
                 std::vector<ScenarioEvent>& out) {
  for (size_t item = 0; item < draws.size(); ++item) {
    const EventDraw& d = draws[item];
    std::mt19937_64 rng(stream_seed(instance, item));
    if (d.is_ramp()) {
      const EventKind kind = d.kind == EventDraw::Kind::kSeqLength ? EventKind::kSeqLength
                                                                   : EventKind::kBatch;
      const int ramp = std::max(0, d.ramp.draw_int(rng));
      size_t prev = out.size();  // this ramp's last event; none yet
      for (int k = 0; k <= d.levels; ++k) {
        ScenarioEvent e;
        e.kind = kind;
        e.step = static_cast<int>(std::llround(double(ramp) * k / d.levels));
        const double v = d.from + double(d.to - d.from) * k / d.levels;
        e.value = std::max(d.multiple, static_cast<int>(v / d.multiple) * d.multiple);
        if (prev < out.size() && out[prev].step == e.step) {
          out[prev] = e;  // a ramp shorter than its levels: the last level at a step wins
        } else {
          prev = out.size();
          out.push_back(e);
        }
      }
      continue;
    }
    const size_t targets = d.kind == EventDraw::Kind::kLinkBandwidth ? d.links.size()
                                                                     : d.rank_groups.size();
    if (targets == 0) throw std::invalid_argument("scenario draw: an item without targets");
    std::vector<std::vector<std::pair<int, int>>> taken(targets);  // [start, end) per target
    const int n = std::max(0, d.count.draw_int(rng));
    for (int j = 0; j < n; ++j) {
      const int s = std::max(0, d.start.draw_int(rng));
      const int len = std::max(1, d.duration.draw_int(rng));
      const double f = d.kind == EventDraw::Kind::kRankLoss ? 1.0 : d.factor.draw(rng);
      const size_t first = std::min(targets - 1, static_cast<size_t>(unit(rng) * targets));
      size_t t = targets;
      for (size_t k = 0; k < targets && t == targets; ++k) {
        const size_t c = (first + k) % targets;
        bool free = true;
        // Not even touching: an end and a start at one step would sort in insertion order.
        for (const auto& [a, b] : taken[c]) free = free && (s + len < a || b < s);
        if (free) t = c;
      }
      if (t == targets) continue;  // every target busy then: the window is dropped
      taken[t].push_back({s, s + len});
      auto push = [&](int step, EventKind kind, int rank, double factor) {
        ScenarioEvent e;
        e.step = step;
        e.kind = kind;
        e.rank = rank;
        e.factor = factor;
        if (d.kind == EventDraw::Kind::kLinkBandwidth) e.target = d.links[t];
        out.push_back(e);
      };
      switch (d.kind) {
        case EventDraw::Kind::kLinkBandwidth:
          push(s, EventKind::kLinkBandwidth, -1, f);
          push(s + len, EventKind::kLinkBandwidth, -1, 1.0);
          break;
        case EventDraw::Kind::kStraggler:
          for (int r : d.rank_groups[t]) push(s, EventKind::kStraggler, r, f);
          for (int r : d.rank_groups[t]) push(s + len, EventKind::kStraggler, r, 1.0);
          break;
        case EventDraw::Kind::kRankLoss:
          for (int r : d.rank_groups[t]) push(s, EventKind::kRankLoss, r, 1.0);
          for (int r : d.rank_groups[t]) push(s + len, EventKind::kRankJoin, r, 1.0);
          break;
        default: break;
      }
    }
  }
}

}  // namespace shardgym
