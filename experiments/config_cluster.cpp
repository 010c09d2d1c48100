// Cluster, hardware catalog and scenario sections of the experiment schema (docs/configs.md).
#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include "experiments/config_parts.h"

namespace shardgym {
namespace config_detail {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kMicro = 1e-6;
constexpr double kPico = 1e-12;

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// "'x' is not a known device (known: a, b); did you mean 'a'?"
std::string unknown_name(const std::string& what, const std::string& name,
                         const std::vector<std::string>& known) {
  std::string hint = closest_name(name, known);
  return "'" + name + "' is not a known " + what +
         " (known: " + (known.empty() ? std::string("none") : join(known)) + ")" +
         (hint.empty() ? std::string() : "; did you mean '" + hint + "'?");
}

// `peak_tflops: 989` or `peak_tflops: {bf16: 989, fp32: 67}`, taken for the model's dtype.
// A map without the model's dtype gives 0 and says why in `missing`: a catalog may hold
// boards that cannot run this model (a V100 has no bf16), and only a cluster that uses one
// is an error (parse_cluster).
double parse_peak_flops(const YamlField& f, DType dtype, std::string& missing) {
  if (!f.is_map()) return f.as_positive_double() * kTera;
  const std::vector<std::string> keys = {"bf16", "fp16", "fp32", "fp64"};
  f.check_keys(keys);
  auto entry = f.optional(dtype_key(dtype));
  if (!entry) {
    missing = f.file() + ":" + std::to_string(f.line()) + ": peak_tflops has no figure for the " +
              "model's dtype '" + dtype_key(dtype) + "' (given: " + join(f.keys()) + ")";
    return 0;
  }
  return entry->as_positive_double() * kTera;
}

DeviceType parse_device(const YamlField& f, DType dtype, std::string& missing) {
  f.check_keys({"name", "peak_tflops", "memory_gib", "memory_bw_gbs", "idle_w", "busy_w",
                "gemm_efficiency", "attention_efficiency", "memory_efficiency"});
  DeviceType d;
  d.name = f.child("name").as_string();
  d.peak_flops = parse_peak_flops(f.child("peak_tflops"), dtype, missing);
  d.memory_bytes = f.child("memory_gib").as_positive_double() * kGiB;
  d.memory_bw = f.child("memory_bw_gbs").as_positive_double() * kGB;
  d.idle_w = f.child("idle_w").as_double(0);
  YamlField busy = f.child("busy_w");
  d.busy_w = busy.as_double(0);
  if (d.busy_w < d.idle_w)
    busy.fail("busy power is below idle power (" + std::to_string(d.idle_w) + " W)");
  auto fraction = [&](const char* key, double& out) {
    if (auto e = f.optional(key)) {
      out = e->as_double(0);
      if (!(out > 0 && out <= 1)) e->fail("must be in (0, 1]");
    }
  };
  fraction("gemm_efficiency", d.gemm_efficiency);
  fraction("attention_efficiency", d.attention_efficiency);
  fraction("memory_efficiency", d.memory_efficiency);
  return d;
}

LinkClass parse_link(const YamlField& f) {
  f.check_keys({"name", "bandwidth_gbs", "latency_us", "energy_pj_per_byte", "bus_efficiency",
                "bulk_latency_us", "bulk_from_mib"});
  LinkClass l;
  l.name = f.child("name").as_string();
  l.bandwidth = f.child("bandwidth_gbs").as_positive_double() * kGB;
  l.latency_s = f.child("latency_us").as_double(0) * kMicro;
  if (auto e = f.optional("energy_pj_per_byte")) l.energy_per_byte = e->as_double(0) * kPico;
  if (auto e = f.optional("bus_efficiency")) {
    l.bus_efficiency = e->as_double(0);
    if (!(l.bus_efficiency > 0 && l.bus_efficiency <= 1)) e->fail("must be in (0, 1]");
  }
  if (auto e = f.optional("bulk_latency_us")) l.bulk_latency_s = e->as_double(0) * kMicro;
  if (auto e = f.optional("bulk_from_mib")) l.bulk_bytes = e->as_double(0) * 1048576.0;
  return l;
}

template <typename T>
std::vector<std::string> names_of(const std::vector<T>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const auto& x : items) out.push_back(x.name);
  return out;
}

}  // namespace

std::string dtype_key(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat16:
      return "fp16";
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat64:
      return "fp64";
  }
  return "bf16";
}

void parse_hardware(const YamlField& map, DType dtype, CatalogSource& into) {
  auto where = [](const YamlField& f) { return f.file() + ":" + std::to_string(f.line()); };
  auto check_new = [](const YamlField& name_field, const std::vector<std::string>& names,
                      const std::vector<std::string>& defined_at) {
    const std::string name = name_field.as_string();
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name)
        name_field.fail("'" + name + "' is already defined at " + defined_at[i]);
    }
  };
  if (auto devices = map.optional("devices")) {
    for (size_t i = 0; i < devices->size(); ++i) {
      YamlField f = devices->at(i);
      f.expect_map();
      std::string missing;
      DeviceType d = parse_device(f, dtype, missing);
      check_new(f.child("name"), names_of(into.catalog.devices), into.device_at);
      into.catalog.devices.push_back(d);
      into.device_at.push_back(where(f));
      into.device_unusable.push_back(missing);
    }
  }
  if (auto links = map.optional("links")) {
    for (size_t i = 0; i < links->size(); ++i) {
      YamlField f = links->at(i);
      f.expect_map();
      LinkClass l = parse_link(f);
      check_new(f.child("name"), names_of(into.catalog.links), into.link_at);
      into.catalog.links.push_back(l);
      into.link_at.push_back(where(f));
    }
  }
}

ClusterSpec parse_cluster(const YamlField& field, DType dtype, CatalogSource included) {
  field.check_keys(
      {"name", "devices", "links", "nodes", "inter_link", "world_size", "calibration"});
  parse_hardware(field, dtype, included);
  const HardwareCatalog& all = included.catalog;
  const std::vector<std::string> device_names = names_of(all.devices);
  const std::vector<std::string> link_names = names_of(all.links);

  ClusterSpec cluster;
  if (auto name = field.optional("name")) cluster.name = name->as_string();
  std::set<std::string> used_devices, used_links;

  YamlField nodes = field.child("nodes");
  int gpus_so_far = 0;
  if (nodes.size() == 0) nodes.fail("a cluster needs at least one node");
  for (size_t i = 0; i < nodes.size(); ++i) {
    YamlField f = nodes.at(i);
    f.check_keys({"device", "gpus", "intra_link", "count"});
    NodeSpec node;
    YamlField device = f.child("device");
    node.device = device.as_string();
    const size_t di = std::find(device_names.begin(), device_names.end(), node.device) -
                      device_names.begin();
    if (di == device_names.size()) device.fail(unknown_name("device", node.device, device_names));
    if (di < included.device_unusable.size() && !included.device_unusable[di].empty())
      device.fail("device '" + node.device + "' cannot run this model: " +
                  included.device_unusable[di]);
    node.gpus = f.child("gpus").as_int(1, 4096);
    YamlField link = f.child("intra_link");
    node.intra_link = link.as_string();
    if (std::find(link_names.begin(), link_names.end(), node.intra_link) == link_names.end()) {
      link.fail(unknown_name("link", node.intra_link, link_names));
    }
    int count = 1;
    std::optional<YamlField> count_field = f.optional("count");
    if (count_field) count = count_field->as_int(1, 4096);
    // Summed per entry before the nodes are made: many large entries overflowed the int of
    // world_size() (UBSan; reproduced with fuzz/config_fuzz).
    const long long total_nodes = static_cast<long long>(cluster.nodes.size()) + count;
    const long long total_gpus = static_cast<long long>(gpus_so_far) + 1LL * count * node.gpus;
    if (total_nodes > ClusterSpec::kMaxNodes || total_gpus > ClusterSpec::kMaxGpus) {
      (count_field ? *count_field : f)
          .fail("the cluster would have " + std::to_string(total_nodes) + " nodes and " +
                std::to_string(total_gpus) + " GPUs; at most " +
                std::to_string(ClusterSpec::kMaxNodes) + " nodes and " +
                std::to_string(ClusterSpec::kMaxGpus) + " GPUs are supported");
    }
    gpus_so_far = static_cast<int>(total_gpus);
    for (int k = 0; k < count; ++k) cluster.nodes.push_back(node);
    used_devices.insert(node.device);
    used_links.insert(node.intra_link);
  }

  if (auto inter = field.optional("inter_link")) {
    cluster.inter_link = inter->as_string();
    if (std::find(link_names.begin(), link_names.end(), cluster.inter_link) == link_names.end()) {
      inter->fail(unknown_name("link", cluster.inter_link, link_names));
    }
    used_links.insert(cluster.inter_link);
  } else if (cluster.nodes.size() > 1) {
    throw ConfigError(field.file(), field.path() + ".inter_link", field.line(),
                      "missing required key: a cluster of " + std::to_string(cluster.nodes.size()) +
                          " nodes needs the link class between nodes");
  }

  // Keep the catalog entries the cluster uses, in catalog order (observations carry one
  // feature per link class, so unused classes would only add constant inputs).
  for (const auto& d : all.devices) {
    if (used_devices.count(d.name)) cluster.devices.push_back(d);
  }
  for (const auto& l : all.links) {
    if (used_links.count(l.name)) cluster.links.push_back(l);
  }

  if (auto ws = field.optional("world_size")) {
    int declared = ws->as_int(1);
    if (declared != cluster.world_size()) {
      ws->fail("world size " + std::to_string(declared) + " does not match the nodes, which hold " +
               std::to_string(cluster.world_size()) + " GPUs");
    }
  }
  std::string problem = cluster.validate();
  if (!problem.empty()) field.fail(problem);
  return cluster;
}

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

}  // namespace

Scenario parse_scenario(const YamlField& field, const ClusterSpec& cluster) {
  field.check_keys({"name", "noise", "events", "seq_mix", "source", "restart"});
  Scenario scenario;
  if (auto name = field.optional("name")) scenario.name = name->as_string();
  if (auto noise = field.optional("noise")) scenario.noise = noise->as_double(0, 1);
  if (auto source = field.optional("source")) source->as_string();  // documentation only
  if (auto mix = field.optional("seq_mix")) expand_seq_mix(*mix, scenario.events);
  auto events = field.optional("events");
  std::vector<std::string> links = names_of(cluster.links);
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
  if (auto restart = field.optional("restart")) {
    // Checkpoint restart of a job whose plan needs a lost rank (scenario.h RestartModel).
    restart->check_keys({"restart_s", "read_gbps", "checkpoint_interval", "source"});
    scenario.restart.restart_s = restart->child("restart_s").as_double(0, 1e6);
    scenario.restart.read_bytes_per_s = restart->child("read_gbps").as_double(1e-3, 1e6) * 1e9;
    scenario.restart.checkpoint_interval = restart->child("checkpoint_interval").as_int(1);
    if (auto source = restart->optional("source")) source->as_string();
  } else if (scenario.has_rank_loss()) {
    field.fail("rank_loss events need a `restart:` section (restart_s, read_gbps, "
               "checkpoint_interval, source): what a job that needs the lost rank pays");
  }
  return scenario;
}

}  // namespace config_detail
}  // namespace shardgym
