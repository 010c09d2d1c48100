#include "runtime/core/cluster_spec.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

namespace shardgym {

int ClusterSpec::world_size() const {
  int p = 0;
  for (const auto& n : nodes) p += n.gpus;
  return p;
}

double ClusterSpec::max_workspace_bytes() const {
  double w = 0;
  for (const DeviceType& d : devices) w = std::max(w, d.workspace_bytes);
  return w;
}

int ClusterSpec::node_of(int rank) const {
  const std::vector<long long>* first = rank_index.get();
  auto find = [&]() -> int {
    if (!first || first->size() != nodes.size() + 1 || rank < 0 || rank >= first->back())
      return -1;
    const int i = static_cast<int>(std::upper_bound(first->begin(), first->end(), rank) -
                                   first->begin()) - 1;
    return rank - (*first)[i] < nodes[i].gpus ? i : -1;  // an entry edited since: rebuild
  };
  int i = find();
  if (i >= 0) return i;
  std::vector<long long> fresh(nodes.size() + 1, 0);
  for (size_t n = 0; n < nodes.size(); ++n) fresh[n + 1] = fresh[n] + nodes[n].gpus;
  first = rank_index.set(std::move(fresh));
  i = find();
  if (i >= 0) return i;
  throw std::out_of_range("rank " + std::to_string(rank) + " outside a world of " +
                          std::to_string(world_size()));
}

int ClusterSpec::device_index(const std::string& name) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == name) return static_cast<int>(i);
  return -1;
}

int ClusterSpec::link_index(const std::string& name) const {
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i].name == name) return static_cast<int>(i);
  return -1;
}

int ClusterSpec::device_index_of(int rank) const {
  return device_index(nodes[node_of(rank)].device);
}

const DeviceType& ClusterSpec::device_of(int rank) const {
  return devices.at(device_index_of(rank));
}

CommMatrix ClusterSpec::comm_matrix() const {
  CommMatrix m;
  const int p = world_size();
  m.world = p;
  m.bandwidth.assign(size_t(p) * p, 0.0);
  m.latency.assign(size_t(p) * p, 0.0);
  m.link.assign(size_t(p) * p, -1);
  std::vector<int> node(p);
  for (int r = 0; r < p; ++r) node[r] = node_of(r);
  const int inter = link_index(inter_link);
  for (int i = 0; i < p; ++i) {
    for (int j = 0; j < p; ++j) {
      if (i == j) continue;
      const int l = node[i] == node[j] ? link_index(nodes[node[i]].intra_link) : inter;
      m.link[i * p + j] = l;
      if (l >= 0) {
        m.bandwidth[i * p + j] = links[l].bandwidth;
        m.latency[i * p + j] = links[l].latency_s;
      }
    }
  }
  return m;
}

const MeasuredBlock* RuntimeCalibration::find(int kind, const std::string& strategy,
                                              const std::string& signature) const {
  if (signature != model_signature) return nullptr;
  for (const MeasuredBlock& b : blocks)
    if (b.kind == kind && b.strategy == strategy) return &b;
  return nullptr;
}

ClusterSpec ClusterSpec::slice(int first, int count) const {
  if (first < 0 || count < 1 || first + count > world_size())
    throw std::out_of_range("ranks [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") outside a world of " +
                            std::to_string(world_size()));
  ClusterSpec out = *this;
  out.nodes.clear();
  int start = 0;
  for (const auto& n : nodes) {
    const int lo = std::max(start, first), hi = std::min(start + n.gpus, first + count);
    if (hi > lo) {
      NodeSpec part = n;
      part.gpus = hi - lo;
      out.nodes.push_back(part);
    }
    start += n.gpus;
  }
  return out;
}

std::string ClusterSpec::validate() const {
  std::ostringstream err;
  std::set<std::string> names;
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    if (!names.insert(d.name).second) return "device '" + d.name + "' is defined twice";
    if (d.peak_flops <= 0) return "device '" + d.name + "': peak_flops must be positive";
    if (d.memory_bytes <= 0) return "device '" + d.name + "': memory must be positive";
    if (d.busy_w < d.idle_w) return "device '" + d.name + "': busy power below idle power";
  }
  names.clear();
  for (const auto& l : links) {
    if (!names.insert(l.name).second) return "link '" + l.name + "' is defined twice";
    if (l.bandwidth <= 0) return "link '" + l.name + "': bandwidth must be positive";
    if (l.latency_s < 0) return "link '" + l.name + "': latency must be ≥ 0";
  }
  if (nodes.empty()) return "the cluster has no nodes";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    const std::string where = "node " + std::to_string(i);
    if (n.gpus <= 0) return where + ": gpus must be positive";
    if (device_index(n.device) < 0) return where + ": unknown device '" + n.device + "'";
    if (n.gpus > 1 && link_index(n.intra_link) < 0)
      return where + ": unknown intra_link '" + n.intra_link + "'";
  }
  if (nodes.size() > 1 && link_index(inter_link) < 0)
    return "unknown inter_link '" + inter_link + "' (needed with more than one node)";
  return err.str();
}

}  // namespace shardgym
