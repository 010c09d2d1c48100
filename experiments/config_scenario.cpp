// The scenario section of the experiment schema (docs/configs.md, `scenario`): scripted
// events, their repetitions, sequence-length mixes, and the distributions an instance's
// events are drawn from (`draw`, runtime/core/scenario_draw.h).
#include <algorithm>
#include <random>

#include "experiments/config_parts.h"

namespace shardgym {
namespace config_detail {

namespace {

// A scenario expands to at most this many events (repetitions and length draws included).
constexpr long long kMaxScenarioEvents = 100000;

// `every: N, until: M` on an event: copies at step, step + N, ... below M.
void repeat_event(const YamlField& f, const ScenarioEvent& e, std::vector<ScenarioEvent>& out) {
  auto every = f.optional("every");
  auto until = f.optional("until");
  if (!every && !until) {
    out.push_back(e);
    return;
  }
  if (!every) until->fail("'until' needs 'every' (the period of the repetition)");
  if (!until) every->fail("'every' needs 'until' (the step the repetition stops before)");
  const int n = every->as_int(1);
  const int end = until->as_int(e.step + 1);
  if ((static_cast<long long>(end) - e.step) / n + static_cast<long long>(out.size()) >
      kMaxScenarioEvents)
    every->fail("the repetition makes more than " + std::to_string(kMaxScenarioEvents) +
                " events");
  for (long long s = e.step; s < end; s += n) {
    ScenarioEvent c = e;
    c.step = static_cast<int>(s);
    out.push_back(c);
  }
}

// `seq_mix:` a sequence length drawn every `every` steps from a histogram (length-grouped
// batching: each iteration's sequences share one length bucket), as kSeqLength events. The
// draws use the raw 64-bit engine output, so every platform gets the same lengths.
void expand_seq_mix(const YamlField& f, std::vector<ScenarioEvent>& out) {
  f.check_keys({"lengths", "weights", "every", "until", "seed", "source"});
  if (auto source = f.optional("source")) source->as_string();  // documentation only
  YamlField lengths = f.child("lengths"), weights = f.child("weights");
  lengths.expect_sequence();
  weights.expect_sequence();
  if (lengths.size() == 0) lengths.fail("needs at least one length");
  if (lengths.size() != weights.size())
    weights.fail(std::to_string(weights.size()) + " weights for " +
                 std::to_string(lengths.size()) + " lengths");
  std::vector<int> len;
  std::vector<double> cum;
  double total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    len.push_back(lengths.at(i).as_int(1));
    total += weights.at(i).as_double(0, 1e12);
    cum.push_back(total);
  }
  if (!(total > 0)) weights.fail("the weights sum to 0");
  const int every = f.optional("every") ? f.child("every").as_int(1) : 1;
  const int until = f.child("until").as_int(1);
  const uint64_t seed = f.optional("seed") ? static_cast<uint64_t>(f.child("seed").as_int(0)) : 0;
  if (until / every + static_cast<long long>(out.size()) > kMaxScenarioEvents)
    f.child("until").fail("the length draws make more than " + std::to_string(kMaxScenarioEvents) +
                          " events");
  std::mt19937_64 rng(seed);
  for (int s = 0; s < until; s += every) {
    const double u = double(rng() >> 11) * 0x1.0p-53 * total;
    size_t k = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
    if (k >= len.size()) k = len.size() - 1;
    ScenarioEvent e;
    e.step = s;
    e.kind = EventKind::kSeqLength;
    e.value = len[k];
    out.push_back(e);
  }
}


// A distribution of a draw item: `3` (constant), `[a, b]` (uniform, ends included),
// `{uniform: [a, b]}`, `{lognormal: {median: m, sigma: s}, min: a, max: b}` or
// `{choice: [x, y], weights: [..]}`. Every value lies in [lo, hi].
Distribution parse_distribution(const YamlField& f, double lo, double hi) {
  auto pair = [&](const YamlField& s) {
    s.expect_sequence();
    if (s.size() != 2) s.fail("expected [low, high]");
    const double a = s.at(0).as_double(lo, hi), b = s.at(1).as_double(lo, hi);
    if (b < a) s.fail("high below low");
    return Distribution::uniform(a, b);
  };
  if (f.is_scalar()) return Distribution::constant(f.as_double(lo, hi));
  if (f.is_sequence()) return pair(f);
  f.expect_map();
  if (auto u = f.optional("uniform")) {
    f.check_keys({"uniform"});
    return pair(*u);
  }
  if (auto c = f.optional("choice")) {
    f.check_keys({"choice", "weights"});
    c->expect_sequence();
    if (c->size() == 0 || c->size() > 1000) c->fail("needs 1 to 1000 values");
    Distribution d;
    d.kind = Distribution::Kind::kChoice;
    for (size_t i = 0; i < c->size(); ++i) d.values.push_back(c->at(i).as_double(lo, hi));
    if (auto w = f.optional("weights")) {
      w->expect_sequence();
      if (w->size() != c->size())
        w->fail(std::to_string(w->size()) + " weights for " + std::to_string(c->size()) +
                " values");
      double total = 0;
      for (size_t i = 0; i < w->size(); ++i) {
        d.weights.push_back(w->at(i).as_double(0, 1e12));
        total += d.weights.back();
      }
      if (!(total > 0)) w->fail("the weights sum to 0");
    }
    return d;
  }
  if (auto l = f.optional("lognormal")) {
    f.check_keys({"lognormal", "min", "max"});
    l->check_keys({"median", "sigma"});
    Distribution d;
    d.kind = Distribution::Kind::kLogNormal;
    d.median = l->child("median").as_double(lo, hi);
    if (!(d.median > 0)) l->child("median").fail("must be > 0");
    d.sigma = l->child("sigma").as_double(0, 10);
    // Bounded on both sides, so an instance's events stay within what the file implies.
    d.low = f.child("min").as_double(lo, hi);
    d.high = f.child("max").as_double(d.low, hi);
    return d;
  }
  f.fail("expected a number, [low, high], or a map with uniform, lognormal or choice");
}

// `draw:` items (runtime/core/scenario_draw.h).
void parse_draws(const YamlField& list, const ClusterSpec& cluster, Scenario& scenario) {
  list.expect_sequence();
  const int world = cluster.world_size();
  long long events = static_cast<long long>(scenario.events.size());
  for (size_t i = 0; i < list.size(); ++i) {
    YamlField f = list.at(i);
    f.expect_map();
    EventDraw d;
    const std::string kind = f.child("kind").as_choice(
        {"straggler", "link_bandwidth", "rank_loss", "seq_length", "batch"});
    if (auto source = f.optional("source")) source->as_string();  // documentation only
    if (kind == "seq_length" || kind == "batch") {
      f.check_keys({"kind", "source", "from", "to", "levels", "ramp", "multiple"});
      d.kind = kind == "seq_length" ? EventDraw::Kind::kSeqLength : EventDraw::Kind::kBatch;
      d.from = f.child("from").as_int(1);
      d.to = f.child("to").as_int(1);
      d.levels = f.child("levels").as_int(1, 10000);
      d.multiple = f.optional("multiple") ? f.child("multiple").as_int(1) : 1;
      d.ramp = parse_distribution(f.child("ramp"), 0, 1e7);
    } else {
      f.check_keys({"kind", "source", "count", "start", "duration", "factor", "target", "among",
                    "link"});
      d.count = parse_distribution(f.child("count"), 0, 1000);
      d.start = parse_distribution(f.child("start"), 0, 1e7);
      d.duration = parse_distribution(f.child("duration"), 1, 1e7);
      if (kind == "link_bandwidth") {
        d.kind = EventDraw::Kind::kLinkBandwidth;
        std::vector<std::string> links;
        for (const auto& l : cluster.links) links.push_back(l.name);
        YamlField link = f.child("link");
        auto add = [&](const YamlField& x) {
          const std::string name = x.as_string();
          if (std::find(links.begin(), links.end(), name) == links.end())
            x.fail(unknown_name("link of this cluster", name, links));
          d.links.push_back(name);
        };
        if (link.is_sequence()) {
          if (link.size() == 0) link.fail("needs at least one link");
          for (size_t k = 0; k < link.size(); ++k) add(link.at(k));
        } else {
          add(link);
        }
        d.factor = parse_distribution(f.child("factor"), 1e-3, 1e3);
      } else {
        d.kind = kind == "straggler" ? EventDraw::Kind::kStraggler : EventDraw::Kind::kRankLoss;
        if (d.kind == EventDraw::Kind::kStraggler)
          d.factor = parse_distribution(f.child("factor"), 1e-3, 1e3);
        else if (f.optional("factor"))
          f.child("factor").fail("a lost rank has no factor");
        // target: rank (each rank a candidate) or node (all of a node's ranks at once).
        const bool node = f.optional("target") &&
                          f.child("target").as_choice({"rank", "node"}) == "node";
        const int n = node ? cluster.num_nodes() : world;
        std::vector<int> among;
        if (auto a = f.optional("among")) {
          a->expect_sequence();
          if (a->size() == 0) a->fail("needs at least one " + std::string(node ? "node" : "rank"));
          for (size_t k = 0; k < a->size(); ++k) among.push_back(a->at(k).as_int(0, n - 1));
        } else {
          for (int k = 0; k < n; ++k) among.push_back(k);
        }
        for (int k : among) {
          std::vector<int> group;
          if (node) {
            int first = 0;
            for (int j = 0; j < k; ++j) first += cluster.nodes[j].gpus;
            for (int r = first; r < first + cluster.nodes[k].gpus; ++r) group.push_back(r);
          } else {
            group.push_back(k);
          }
          d.rank_groups.push_back(std::move(group));
        }
      }
    }
    events += d.max_events();
    if (events > kMaxScenarioEvents)
      f.fail("the scenario's events and draws make up to " + std::to_string(events) +
             " events, more than " + std::to_string(kMaxScenarioEvents));
    scenario.draws.push_back(std::move(d));
  }
}

}  // namespace

Scenario parse_scenario(const YamlField& field, const ClusterSpec& cluster) {
  field.check_keys({"name", "noise", "events", "seq_mix", "draw", "source", "restart"});
  Scenario scenario;
  if (auto name = field.optional("name")) scenario.name = name->as_string();
  if (auto noise = field.optional("noise")) scenario.noise = noise->as_double(0, 1);
  if (auto source = field.optional("source")) source->as_string();  // documentation only
  if (auto mix = field.optional("seq_mix")) expand_seq_mix(*mix, scenario.events);
  auto events = field.optional("events");
  std::vector<std::string> links;
  for (const auto& l : cluster.links) links.push_back(l.name);
  for (size_t i = 0; events && i < events->size(); ++i) {
    YamlField f = events->at(i);
    f.expect_map();
    ScenarioEvent e;
    std::string kind = f.child("kind").as_choice(
        {"link_bandwidth", "straggler", "seq_length", "batch", "rank_loss", "rank_join"});
    if (kind == "link_bandwidth") {
      f.check_keys({"step", "kind", "link", "factor", "every", "until"});
      e.kind = EventKind::kLinkBandwidth;
      YamlField link = f.child("link");
      e.target = link.as_string();
      if (std::find(links.begin(), links.end(), e.target) == links.end()) {
        link.fail(unknown_name("link of this cluster", e.target, links));
      }
      e.factor = f.child("factor").as_positive_double();
    } else if (kind == "straggler") {
      f.check_keys({"step", "kind", "rank", "factor", "every", "until"});
      e.kind = EventKind::kStraggler;
      e.rank = f.child("rank").as_int(0, cluster.world_size() - 1);
      e.factor = f.child("factor").as_positive_double();
    } else if (kind == "rank_loss" || kind == "rank_join") {
      // One rank, or every rank of one node.
      f.check_keys({"step", "kind", "rank", "node", "every", "until"});
      e.kind = kind == "rank_loss" ? EventKind::kRankLoss : EventKind::kRankJoin;
      e.step = f.child("step").as_int(0);
      if (f.optional("rank") && f.optional("node"))
        f.child("node").fail("give rank or node, not both");
      if (auto node = f.optional("node")) {
        const int n = node->as_int(0, cluster.num_nodes() - 1);
        int first = 0;
        for (int i = 0; i < n; ++i) first += cluster.nodes[i].gpus;
        if (scenario.events.size() + size_t(cluster.nodes[n].gpus) > size_t(kMaxScenarioEvents))
          node->fail("the node's ranks make more than " + std::to_string(kMaxScenarioEvents) +
                     " events");
        for (int r = first; r < first + cluster.nodes[n].gpus; ++r) {
          e.rank = r;
          repeat_event(f, e, scenario.events);
        }
        continue;
      }
      e.rank = f.child("rank").as_int(0, cluster.world_size() - 1);
    } else {
      f.check_keys({"step", "kind", "value", "every", "until"});
      e.kind = kind == "seq_length" ? EventKind::kSeqLength : EventKind::kBatch;
      e.value = f.child("value").as_int(1);
    }
    e.step = f.child("step").as_int(0);
    repeat_event(f, e, scenario.events);
  }
  std::stable_sort(scenario.events.begin(), scenario.events.end(),
                   [](const ScenarioEvent& a, const ScenarioEvent& b) { return a.step < b.step; });
  if (auto draw = field.optional("draw")) parse_draws(*draw, cluster, scenario);
  bool draws_loss = false;
  for (const EventDraw& d : scenario.draws) draws_loss = draws_loss || d.kind == EventDraw::Kind::kRankLoss;
  if (auto restart = field.optional("restart")) {
    // Checkpoint restart of a job whose plan needs a lost rank (scenario.h RestartModel).
    restart->check_keys({"restart_s", "read_gbps", "checkpoint_interval", "source"});
    scenario.restart.restart_s = restart->child("restart_s").as_double(0, 1e6);
    scenario.restart.read_bytes_per_s = restart->child("read_gbps").as_double(1e-3, 1e6) * 1e9;
    scenario.restart.checkpoint_interval = restart->child("checkpoint_interval").as_int(1);
    if (auto source = restart->optional("source")) source->as_string();
  } else if (scenario.has_rank_loss() || draws_loss) {
    field.fail("rank_loss events need a `restart:` section (restart_s, read_gbps, "
               "checkpoint_interval, source): what a job that needs the lost rank pays");
  }
  return scenario;
}

}  // namespace config_detail
}  // namespace shardgym
