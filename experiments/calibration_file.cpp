#include "experiments/calibration_file.h"

#include <cstdio>
#include <sstream>

#include "experiments/config_parts.h"
#include "runtime/core/plan.h"
#include "runtime/core/strategy.h"

namespace shardgym {
namespace {

constexpr const char* kFormat = "shardgym-calibration";
// Calibration tables are small: one row per catalog strategy and block kind.
constexpr size_t kMaxBlocks = 1 << 16;
// Pipelined plans of the pipeline pass: a few per stage count the world allows.
constexpr size_t kMaxPipelines = 1 << 10;

// 17 significant digits: a double written and read back is the same double.
std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string calibration_to_yaml(const CalibrationFile& c) {
  const RuntimeCalibration& r = c.runtime;
  std::ostringstream o;
  o << "# Measured on the live runtime by `shardgym calibrate`; format: docs/calibration.md.\n"
    << "# Use it with `cluster.calibration: <this file>` in an experiment config.\n"
    << "format: " << kFormat << "\n"
    << "version: " << CalibrationFile::kVersion << "\n"
    << "created: " << quoted(c.created) << "\n"
    << "command: " << quoted(c.command) << "\n"
    << "config: " << quoted(c.config) << "\n"
    << "machine: {host: " << quoted(c.host) << ", cpu: " << quoted(c.cpu)
    << ", os: " << quoted(c.os) << ", cores: " << c.cores << ", memory_gib: " << num(c.memory_gib)
    << "}\n"
    << "live: {backend: " << quoted(c.backend) << ", launch: " << quoted(c.launch)
    << ", device: " << quoted(c.device) << ", ranks: " << c.ranks
    << ", threads_per_rank: " << c.threads_per_rank << "}\n"
    << "measurement: {plans: " << c.plans << ", warmup: " << c.warmup
    << ", iterations: " << c.iterations << ", passes: " << c.passes
    << ", statistic: median, drift_reference: " << quoted(c.drift_reference)
    << ", drift_spread: " << num(c.drift_spread)
    << ", drift_reference_s: " << num(c.drift_reference_s) << "}\n"
    << "# Fitted physical model, used for blocks the table below does not hold.\n"
    << "device: {name: " << quoted(c.device_name) << ", peak_flops: " << num(c.peak_flops)
    << ", memory_bw: " << num(c.memory_bw)
    << (c.kernel_s > 0 ? ", kernel_s: " + num(c.kernel_s) : std::string())
    << (c.kernel_s > 0 && c.collective_s >= 0 ? ", collective_s: " + num(c.collective_s)
                                              : std::string())
    << ", fit_error: " << num(c.compute_fit_error) << "}\n"
    << "link: {name: " << quoted(c.link_name) << ", latency_s: " << num(c.link_latency_s)
    << ", bandwidth: " << num(c.link_bandwidth) << ", fit_error: " << num(c.comm_fit_error) << "}\n"
    << "overhead: {step_s: " << num(r.step_overhead_s)
    << ", optimizer_s_per_param: " << num(r.optimizer_s_per_param)
    << ", redistribution_s: " << num(r.redistribution_s)
    << ", redistribution_scale: " << num(r.redistribution_scale)
    << ", fit_error: " << num(c.overhead_fit_error) << "}\n"
    << "noise: {sigma: " << num(r.noise_sigma) << "}\n"
    << "memory: {state_scale: " << num(r.memory_state_scale)
    << ", activation_scale: " << num(r.memory_activation_scale)
    << ", base_bytes: " << num(r.memory_base_bytes) << ", fit_error: " << num(c.memory_fit_error)
    << "}\n"
    << "repartition: {fixed_s: " << num(r.repartition_fixed_s)
    << ", per_block_s: " << num(r.repartition_per_block_s)
    << ", per_message_s: " << num(r.repartition_per_message_s)
    << ", bandwidth: " << num(r.repartition_bandwidth)
    << ", fit_error: " << num(c.repartition_fit_error) << "}\n"
    << "model_signature: " << quoted(r.model_signature) << "\n";
  if (!c.collectives.empty()) {
    o << "# Collectives and stage boundaries alone: slowest member's median seconds. The\n"
      << "# collectives' fit is not used by the simulator; p2p prices stage-to-stage transfers.\n"
      << "collectives:\n"
      << "  fit: {latency_s: " << num(c.collective_latency_s)
      << ", bandwidth: " << num(c.collective_bandwidth)
      << ", fit_error: " << num(c.collective_fit_error) << "}\n";
    if (c.p2p_bandwidth > 0)
      o << "  p2p: {latency_s: " << num(c.p2p_latency_s) << ", bandwidth: " << num(c.p2p_bandwidth)
        << ", fit_error: " << num(c.p2p_fit_error) << "}\n";
    o << "  timings:\n";
    for (const CalibrationFile::Collective& t : c.collectives)
      o << "    - {op: " << t.op << ", group: " << quoted(t.group) << ", bytes: " << num(t.bytes)
        << ", seconds: " << num(t.seconds) << "}\n";
  }
  if (!c.pipelines.empty()) {
    o << "# The schedule's fill and drain: uniform pipelined plans, measured as the table's\n"
      << "# plans; bubble = 1 - m * stage_compute_s / (step_s - optimizer_s). Not used by the\n"
      << "# simulator.\n"
      << "pipelines:\n";
    for (const CalibrationFile::PipelineTiming& t : c.pipelines)
      o << "  - {plan: " << quoted(t.plan) << ", step_s: " << num(t.step_s)
        << ", optimizer_s: " << num(t.optimizer_s)
        << ", stage_compute_s: " << num(t.stage_compute_s) << ", bubble: " << num(t.bubble)
        << "}\n";
  }
  o << "# Seconds per micro-batch, slowest rank, median over the iterations.\n"
    << "blocks:\n";
  for (const MeasuredBlock& b : r.blocks) {
    o << "  - {kind: " << (b.kind == 0 ? "attention" : "mlp")
      << ", strategy: " << quoted(b.strategy) << ", fwd_s: " << num(b.fwd_s)
      << ", bwd_s: " << num(b.bwd_s) << ", comm_s: " << num(b.comm_s)
      << ", spread: " << num(b.spread) << "}\n";
  }
  if (r.blocks.empty()) o << "  []\n";
  return o.str();
}

namespace {

// The file's sections (docs/calibration.md), each into `c`.
void parse_provenance(const YamlField& root, CalibrationFile& c) {
  c.created = root.child("created").as_string();
  if (auto f = root.optional("command")) c.command = f->as_string();
  if (auto f = root.optional("config")) c.config = f->as_string();
  if (auto m = root.optional("machine")) {
    m->check_keys({"host", "cpu", "os", "cores", "memory_gib"});
    if (auto f = m->optional("host")) c.host = f->as_string();
    if (auto f = m->optional("cpu")) c.cpu = f->as_string();
    if (auto f = m->optional("os")) c.os = f->as_string();
    if (auto f = m->optional("cores")) c.cores = f->as_int(0);
    if (auto f = m->optional("memory_gib")) c.memory_gib = f->as_double(0);
  }
  YamlField live = root.child("live");
  live.check_keys({"backend", "launch", "device", "ranks", "threads_per_rank"});
  c.backend = live.child("backend").as_string();
  c.launch = live.child("launch").as_string();
  c.device = live.child("device").as_string();
  c.ranks = live.child("ranks").as_int(1, ClusterSpec::kMaxGpus);
  if (auto f = live.optional("threads_per_rank")) c.threads_per_rank = f->as_int(0);
  if (auto m = root.optional("measurement")) {
    m->check_keys({"plans", "warmup", "iterations", "passes", "statistic", "drift_reference",
                   "drift_spread", "drift_reference_s"});
    if (auto f = m->optional("plans")) c.plans = f->as_int(0);
    if (auto f = m->optional("warmup")) c.warmup = f->as_int(0);
    if (auto f = m->optional("iterations")) c.iterations = f->as_int(0);
    if (auto f = m->optional("passes")) c.passes = f->as_int(1, 100);
    if (auto f = m->optional("statistic")) f->as_choice({"median"});
    if (auto f = m->optional("drift_reference")) c.drift_reference = f->as_string();
    if (auto f = m->optional("drift_spread")) c.drift_spread = f->as_double(0, 100);
    if (auto f = m->optional("drift_reference_s")) c.drift_reference_s = f->as_double(0, 1e6);
  }
}

void parse_device_and_link(const YamlField& root, CalibrationFile& c) {
  YamlField dev = root.child("device");
  dev.check_keys({"name", "peak_flops", "memory_bw", "kernel_s", "collective_s", "fit_error"});
  if (auto f = dev.optional("kernel_s")) c.kernel_s = f->as_double(0, 1.0);
  if (auto f = dev.optional("collective_s")) c.collective_s = f->as_double(0, 1.0);
  c.device_name = dev.child("name").as_string();
  c.peak_flops = dev.child("peak_flops").as_positive_double();
  c.memory_bw = dev.child("memory_bw").as_positive_double();
  if (auto f = dev.optional("fit_error")) c.compute_fit_error = f->as_double(0);
  YamlField link = root.child("link");
  link.check_keys({"name", "latency_s", "bandwidth", "fit_error"});
  c.link_name = link.child("name").as_string();
  c.link_latency_s = link.child("latency_s").as_double(0, 1e3);
  c.link_bandwidth = link.child("bandwidth").as_positive_double();
  if (auto f = link.optional("fit_error")) c.comm_fit_error = f->as_double(0);
}

void parse_step_fits(const YamlField& root, CalibrationFile& c) {
  RuntimeCalibration& r = c.runtime;
  YamlField over = root.child("overhead");
  over.check_keys(
      {"step_s", "optimizer_s_per_param", "redistribution_s", "redistribution_scale", "fit_error"});
  r.step_overhead_s = over.child("step_s").as_double(0, 1e6);
  r.optimizer_s_per_param = over.child("optimizer_s_per_param").as_double(0, 1);
  if (auto f = over.optional("redistribution_s")) r.redistribution_s = f->as_double(0, 1e6);
  if (auto f = over.optional("redistribution_scale")) r.redistribution_scale = f->as_double(0, 1e3);
  if (auto f = over.optional("fit_error")) c.overhead_fit_error = f->as_double(0);
  if (auto n = root.optional("noise")) {
    n->check_keys({"sigma"});
    r.noise_sigma = n->child("sigma").as_double(0, 10);
  }
  if (auto m = root.optional("memory")) {
    m->check_keys({"state_scale", "activation_scale", "base_bytes", "fit_error"});
    r.memory_state_scale = m->child("state_scale").as_double(0, 1e3);
    r.memory_activation_scale = m->child("activation_scale").as_double(0, 1e3);
    r.memory_base_bytes = m->child("base_bytes").as_double(0, 1e15);
    if (auto f = m->optional("fit_error")) c.memory_fit_error = f->as_double(0);
  }
  if (auto rp = root.optional("repartition")) {
    rp->check_keys({"fixed_s", "per_block_s", "per_message_s", "bandwidth", "fit_error"});
    r.repartition_fixed_s = rp->child("fixed_s").as_double(0, 1e6);
    r.repartition_per_block_s = rp->child("per_block_s").as_double(0, 1e6);
    if (auto f = rp->optional("per_message_s")) r.repartition_per_message_s = f->as_double(0, 1e6);
    r.repartition_bandwidth = rp->child("bandwidth").as_double(0, 1e18);
    if (auto f = rp->optional("fit_error")) c.repartition_fit_error = f->as_double(0);
  }
}

void parse_collectives(const YamlField& root, CalibrationFile& c) {
  if (auto co = root.optional("collectives")) {
    co->check_keys({"fit", "p2p", "timings"});
    YamlField fit = co->child("fit");
    fit.check_keys({"latency_s", "bandwidth", "fit_error"});
    c.collective_latency_s = fit.child("latency_s").as_double(0, 1e3);
    c.collective_bandwidth = fit.child("bandwidth").as_double(0, 1e18);
    if (auto f = fit.optional("fit_error")) c.collective_fit_error = f->as_double(0);
    if (auto p2p = co->optional("p2p")) {
      p2p->check_keys({"latency_s", "bandwidth", "fit_error"});
      c.p2p_latency_s = p2p->child("latency_s").as_double(0, 1e3);
      c.p2p_bandwidth = p2p->child("bandwidth").as_double(1, 1e18);
      if (auto f = p2p->optional("fit_error")) c.p2p_fit_error = f->as_double(0);
    }
    YamlField ts = co->child("timings");
    ts.expect_sequence();
    if (ts.size() > kMaxBlocks)
      ts.fail(std::to_string(ts.size()) + " timings; a calibration holds at most " +
              std::to_string(kMaxBlocks));
    for (size_t i = 0; i < ts.size(); ++i) {
      YamlField f = ts.at(i);
      f.check_keys({"op", "group", "bytes", "seconds"});
      CalibrationFile::Collective t;
      t.op = f.child("op").as_choice({"all_reduce", "all_gather", "reduce_scatter", "p2p"});
      t.group = f.child("group").as_string();
      t.bytes = f.child("bytes").as_double(0, 1e15);
      t.seconds = f.child("seconds").as_double(0, 1e6);
      c.collectives.push_back(std::move(t));
    }
  }
}

void parse_pipelines(const YamlField& root, CalibrationFile& c) {
  auto ps = root.optional("pipelines");
  if (!ps) return;
  ps->expect_sequence();
  if (ps->size() > kMaxPipelines)
    ps->fail(std::to_string(ps->size()) + " pipelined plans; a calibration holds at most " +
             std::to_string(kMaxPipelines));
  for (size_t i = 0; i < ps->size(); ++i) {
    YamlField f = ps->at(i);
    f.check_keys({"plan", "step_s", "optimizer_s", "stage_compute_s", "bubble"});
    CalibrationFile::PipelineTiming t;
    YamlField plan = f.child("plan");
    t.plan = plan.as_string();
    const size_t at = t.plan.find('@');
    bool pipelined = t.plan.size() <= 256 && at != std::string::npos;
    try {
      if (pipelined) Pipeline::parse(t.plan.substr(at + 1));
    } catch (const std::invalid_argument&) {
      pipelined = false;
    }
    if (!pipelined)
      plan.fail("'" + t.plan.substr(0, 256) + "' is not a pipelined plan (text ending in @pp(...))");
    t.step_s = f.child("step_s").as_double(0, 1e6);
    t.optimizer_s = f.child("optimizer_s").as_double(0, 1e6);
    t.stage_compute_s = f.child("stage_compute_s").as_double(0, 1e6);
    t.bubble = f.child("bubble").as_double(-1e6, 1);
    c.pipelines.push_back(std::move(t));
  }
}

void parse_blocks(const YamlField& root, RuntimeCalibration& r) {
  r.model_signature = root.child("model_signature").as_string();
  YamlField blocks = root.child("blocks");
  blocks.expect_sequence();
  if (blocks.size() > kMaxBlocks)
    blocks.fail(std::to_string(blocks.size()) + " rows; a calibration holds at most " +
                std::to_string(kMaxBlocks));
  for (size_t i = 0; i < blocks.size(); ++i) {
    YamlField f = blocks.at(i);
    f.check_keys({"kind", "strategy", "fwd_s", "bwd_s", "comm_s", "spread"});
    MeasuredBlock b;
    b.kind = f.child("kind").as_choice({"attention", "mlp"}) == "attention" ? 0 : 1;
    YamlField s = f.child("strategy");
    try {
      b.strategy = Strategy::parse(s.as_string()).to_string();
    } catch (const std::exception& e) {
      s.fail(e.what());
    }
    b.fwd_s = f.child("fwd_s").as_double(0, 1e6);
    b.bwd_s = f.child("bwd_s").as_double(0, 1e6);
    b.comm_s = f.child("comm_s").as_double(0, 1e6);
    if (auto sp = f.optional("spread")) b.spread = sp->as_double(0);
    r.blocks.push_back(b);
  }
}

}  // namespace

CalibrationFile parse_calibration_file(const std::string& text, const std::string& file) {
  using config_detail::parse_yaml_text;
  YamlField root(parse_yaml_text(text, file), file, "", 1);
  if (!root.is_map()) root.fail("a calibration file is a map (see docs/calibration.md)");
  root.check_keys({"format", "version", "created", "command", "config", "machine", "live",
                   "measurement", "device", "link", "overhead", "noise", "memory", "repartition",
                   "model_signature", "blocks", "collectives", "pipelines"});
  YamlField format = root.child("format");
  if (format.as_string() != kFormat)
    format.fail("'" + format.as_string() + "' is not a calibration file (format: " + kFormat + ")");
  YamlField version = root.child("version");
  if (version.as_int() != CalibrationFile::kVersion)
    version.fail("version " + version.as_string() + " is not supported (this build reads " +
                 std::to_string(CalibrationFile::kVersion) + ")");
  CalibrationFile c;
  parse_provenance(root, c);
  parse_device_and_link(root, c);
  parse_step_fits(root, c);
  parse_collectives(root, c);
  parse_pipelines(root, c);
  parse_blocks(root, c.runtime);
  return c;
}

CalibrationFile load_calibration_file(const std::string& path) {
  return parse_calibration_file(config_detail::read_config_text(path, path, "", 0), path);
}

std::string apply_calibration(const CalibrationFile& c, const std::string& path,
                              ClusterSpec& cluster) {
  if (c.ranks != cluster.world_size())
    return "it was measured with " + std::to_string(c.ranks) + " ranks; this cluster has " +
           std::to_string(cluster.world_size());
  const int d = cluster.device_index(c.device_name);
  if (d < 0) return "its device '" + c.device_name + "' is not one of this cluster's";
  const int l = cluster.link_index(c.link_name);
  if (l < 0) return "its link '" + c.link_name + "' is not one of this cluster's";
  DeviceType& dev = cluster.devices[d];
  dev.peak_flops = c.peak_flops;
  dev.memory_bw = c.memory_bw;
  dev.gemm_efficiency = 0.80;  // the fitted peak is an effective rate at the builtin table's top
  if (c.kernel_s > 0) {
    dev.host_kernel_s = c.kernel_s, dev.host_micro_batch_s = 0;
    dev.host_collective_s = c.collective_s;  // < 0 (older files): as a kernel
  }
  LinkClass& link = cluster.links[l];
  link.latency_s = c.link_latency_s;
  link.bandwidth = c.link_bandwidth;
  link.bus_efficiency = 1.0;  // fitted as the bandwidth a ring step reaches
  link.bulk_latency_s = -1;
  link.bulk_bytes = 0;
  // Stage-to-stage transfers: the stage boundaries timed alone, else (older files) the
  // collectives alone per ring step; else as the link (calibration_file.h).
  if (c.p2p_bandwidth > 0) {
    link.p2p_latency_s = c.p2p_latency_s, link.p2p_bandwidth = c.p2p_bandwidth;
  } else if (c.collective_bandwidth > 0) {
    link.p2p_latency_s = c.collective_latency_s, link.p2p_bandwidth = c.collective_bandwidth;
  }
  cluster.calibration = c.runtime;
  cluster.calibration.path = path;
  cluster.calibration.host_cores = c.cores;
  cluster.calibration.serial_host = c.device == "cpu" && c.kernel_s > 0;
  return "";
}

}  // namespace shardgym
