// ClusterSpec: devices, nodes and link classes, and the hierarchical communication matrix
// derived from them (docs/design.md §3, "Hierarchical communication matrix").
//
// Ranks are numbered node by node: node 0 holds ranks [0, n0), node 1 the next n1, ...
// Inside a node ranks talk over the node's `intra_link`; across nodes over `inter_link`.
// The α–β cost of a collective over a rank group is set by the group's bottleneck link.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/rank_index_cache.h"
#include "runtime/core/runtime_calibration.h"

namespace shardgym {

struct DeviceType {
  std::string name;         // "H100-SXM5-80GB"
  double peak_flops = 0;    // dense FLOP/s in the model's dtype
  double memory_bytes = 0;  // HBM capacity
  double memory_bw = 0;     // HBM bandwidth, B/s (roofline)
  double idle_w = 0;        // board power when idle
  double busy_w = 0;        // board power under sustained GEMM load
  // Fractions of the datasheet peaks that real kernels reach (origins in hardware.yaml).
  double gemm_efficiency = 0.80;       // large dense GEMMs (cuBLAS) / peak_flops
  double attention_efficiency = 0.50;  // fused (flash) attention kernels / peak_flops
  // A GEMM kernel's fixed time on the device (launch, ramp-up, tail), measured; 0 = not stated:
  // GEMMs take the calibration table's shape efficiencies instead (runtime/sim/calibration.h).
  double gemm_fixed_s = 0;
  // Streaming (memory-bound) kernels / memory_bw; 0 = not stated: memory-bound kernels and
  // the optimizer step are left out, as in the model before pipelines.
  double memory_efficiency = 0;
  // The host that drives this device (docs/design.md §4, "Host issue"): CPU time to issue
  // one kernel or collective through the framework, and the framework's own work per
  // micro-batch (its schedule loop, data, loss bookkeeping). A micro-batch on a pipeline
  // stage takes at least the time its host needs to issue it. 0 = not stated (no bound).
  double host_kernel_s = 0;
  double host_micro_batch_s = 0;
  // How a micro-batch's GPU time G and its host's issue time H combine (docs/design.md §4):
  // (G^q + H^q)^(1/q). q = 1 adds them (a host that waits for every kernel); a large q is
  // max(G, H) (a host that always runs ahead of its GPU). 0 = not stated: max(G, H).
  double host_overlap_exponent = 0;
  // A collective's own time on the host, where it is stated apart from a kernel's (a CPU
  // rank's calibration: argument checks, contiguous copies and the call into the backend on
  // the rank's thread); < 0: a collective costs host_kernel_s like a kernel.
  double host_collective_s = -1;
  // Device memory the framework's allocator holds on each rank besides the model's tensors
  // and counts in its peak: PyTorch's cuBLAS workspaces, one per (handle, stream), 32 MiB on
  // Hopper; a training step issues GEMMs from two threads (its own and autograd's device
  // thread), so two (both measured on an H200, scripts/gpu_workspace_probe.py,
  // docs/live-fidelity.md, "On a GPU's caching allocator"). 0 = not stated. Every rank's peak
  // memory includes it (simulator, live action mask, validate-sim's live estimate).
  double workspace_bytes = 0;
};

struct LinkClass {
  std::string name;          // "nvswitch", "pcie4", "ib-hdr100", ...
  double bandwidth = 0;      // B/s per direction per rank
  double latency_s = 0;      // α of the α–β model: per ring step, small messages
  double energy_per_byte = 0;  // J/B moved
  // Collective efficiency as nccl-tests measures it (collective_model.h): bus bandwidth
  // reached by large messages / `bandwidth`, and the per-step latency of NCCL's bulk protocol
  // used for messages of at least `bulk_bytes` (below: `latency_s` at 120/128 of the bandwidth,
  // NCCL's LL128). Defaults give the plain α–β ring.
  double bus_efficiency = 1.0;
  double bulk_latency_s = -1;  // < 0: same as latency_s
  double bulk_bytes = 0;       // 0: every message uses the bulk protocol
  // A pipeline's stage-to-stage transfer (each rank sends to and receives from its
  // counterpart, posted together): its own α and B where measured (a calibration's stage
  // boundaries timed alone, docs/calibration.md); < 0: a ring step's (latency_s, bandwidth ·
  // bus_efficiency).
  double p2p_latency_s = -1, p2p_bandwidth = -1;
};

struct NodeSpec {
  std::string device;  // DeviceType::name
  int gpus = 0;
  std::string intra_link;  // LinkClass::name
};

// The P×P matrix: bandwidth, latency and link-class index between every pair of ranks.
struct CommMatrix {
  int world = 0;
  std::vector<double> bandwidth;  // world*world, B/s (0 on the diagonal)
  std::vector<double> latency;    // world*world, s
  std::vector<int> link;          // world*world, index into ClusterSpec::links, -1 on diagonal
  double bw(int i, int j) const { return bandwidth[i * world + j]; }
  double lat(int i, int j) const { return latency[i * world + j]; }
  int link_of(int i, int j) const { return link[i * world + j]; }
};

struct ClusterSpec {
  std::string name;
  std::vector<DeviceType> devices;
  std::vector<LinkClass> links;
  std::vector<NodeSpec> nodes;
  std::string inter_link;  // LinkClass::name between nodes ("" for one node)
  RuntimeCalibration calibration;  // cluster.calibration (empty: none)

  // Bounds on a cluster, so that world_size() and the rank arithmetic stay within an int
  // (configs are checked against them): one `nodes:` entry's largest, 4096 nodes × 4096 GPUs.
  static constexpr int kMaxNodes = 1 << 16;
  static constexpr int kMaxGpus = 1 << 24;

  int world_size() const;
  // The largest DeviceType::workspace_bytes of the devices: what the fullest rank adds.
  double max_workspace_bytes() const;
  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int node_of(int rank) const;
  const DeviceType& device_of(int rank) const;
  int device_index_of(int rank) const;
  int link_index(const std::string& name) const;  // -1 if unknown
  int device_index(const std::string& name) const;

  CommMatrix comm_matrix() const;
  // The ranks [first, first + count) as a cluster of their own (a pipeline stage): their
  // nodes cut to the ranks they hold, the same device and link classes.
  ClusterSpec slice(int first, int count) const;
  // Empty when consistent, else what is wrong (unknown device / link names, zero gpus, ...).
  std::string validate() const;

  RankIndexCache rank_index;  // node_of()'s index (see RankIndexCache); not part of the spec
};

}  // namespace shardgym
