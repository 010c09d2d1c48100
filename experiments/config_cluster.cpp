// Cluster and hardware catalog sections of the experiment schema (docs/configs.md).
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
                "gemm_efficiency", "gemm_fixed_us", "attention_efficiency", "memory_efficiency",
                "host_kernel_us", "host_micro_batch_us", "host_overlap_exponent",
                "workspace_mib"});
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
  // At most a millisecond per GEMM kernel, a second per kernel issued or micro-batch: larger
  // is a unit mistake, not a device or a host.
  if (auto e = f.optional("gemm_fixed_us")) d.gemm_fixed_s = e->as_double(0, 1e3) * kMicro;
  if (auto e = f.optional("host_kernel_us")) d.host_kernel_s = e->as_double(0, 1e6) * kMicro;
  if (auto e = f.optional("host_micro_batch_us"))
    d.host_micro_batch_s = e->as_double(0, 1e6) * kMicro;
  // 1 adds host and GPU time; beyond 64 the combination is max(G, H) to 1 % or better.
  if (auto e = f.optional("host_overlap_exponent")) d.host_overlap_exponent = e->as_double(1, 64);
  // At most 64 GiB: a framework's workspaces beside the model, not the model.
  if (auto e = f.optional("workspace_mib"))
    d.workspace_bytes = e->as_double(0, 65536) * (kGiB / 1024);
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

// "'x' is not a known device (known: a, b); did you mean 'a'?"
std::string unknown_name(const std::string& what, const std::string& name,
                         const std::vector<std::string>& known) {
  std::string hint = closest_name(name, known);
  return "'" + name + "' is not a known " + what +
         " (known: " + (known.empty() ? std::string("none") : join(known)) + ")" +
         (hint.empty() ? std::string() : "; did you mean '" + hint + "'?");
}


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

}  // namespace config_detail
}  // namespace shardgym
