#include "runtime/sim/cost_report.h"

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace shardgym {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

CostReport make_cost_report(const SimRun& run, const Plan& plan) {
  const std::optional<Measurement> est = run.estimate(plan);
  if (!est || !est->ok)
    throw std::invalid_argument("cost report: " + (est ? est->error : std::string("no estimate")));
  const CostModel& cm = run.cost_model();
  const HeadCost head = cm.head_cost();
  CostReport r;
  r.model = run.model().name;
  r.cluster = run.cluster().name;
  r.plan = plan.to_string();
  r.calibration = cm.calibration().source();
  r.world = cm.world();
  r.step_latency_s = est->step_latency_s;
  r.repartition_s = est->repartition_s;
  r.energy_j = est->energy_j;
  r.tokens = est->tokens;
  r.peak_memory_bytes = est->peak_memory_bytes.empty() ? 0 : est->peak_memory_bytes[0];
  r.memory_capacity = head.memory_capacity;
  r.oom = est->oom;
  r.head_s = head.compute_s + head.grad_sync_s;
  for (int b = 0; b < plan.size(); ++b) {
    const BlockKind kind = ModelSpec::block_kind(b);
    const Strategy& s = plan.blocks[b];
    const BlockCost c = cm.block_cost(kind, s, true);
    BlockReport br;
    br.block = b;
    br.kind = block_kind_name(kind);
    br.strategy = s.to_string();
    br.flops_per_rank = c.flops_per_rank;
    br.fwd_s = c.fwd_s, br.bwd_s = c.bwd_s;
    br.tp_comm_s = c.tp_comm_fwd_s + c.tp_comm_bwd_s;
    br.grad_sync_s = c.grad_sync_s;
    br.comm_s = c.comm_s + c.grad_sync_s;  // exposed TP communication + gradient reduction
    br.comm_bytes_per_rank = c.comm_bytes_per_rank;
    br.state_bytes = c.state_bytes;
    const bool after_recompute = kind == BlockKind::kMlp && plan.blocks[b - 1].recompute;
    br.activation_bytes = after_recompute ? c.activation_bytes_prev_recompute : c.activation_bytes;
    if (b > 0) br.redistribution_s = cm.redistribution(plan.blocks[b - 1], s).time_s;
    br.energy_j = head.idle_power_w * (c.fwd_s + c.bwd_s + br.comm_s) + c.busy_energy_j +
                  c.link_energy_j;
    for (const auto& cc : c.collectives) {
      CollectiveLine l;
      l.what = cc.collective.what ? cc.collective.what : "";
      l.op = coll_op_name(cc.collective.op);
      l.axis = comm_axis_name(cc.collective.axis);
      l.group_size = cc.collective.group_size;
      l.forward = cc.collective.forward;
      l.elements = cc.collective.elements;
      l.bytes_per_rank = cc.bytes_per_rank;
      l.time_s = cc.time_s;
      br.collectives.push_back(l);
    }
    r.compute_s += br.fwd_s + br.bwd_s;
    r.comm_s += br.comm_s;
    r.redistribution_s += br.redistribution_s;
    r.blocks.push_back(std::move(br));
  }
  if (!plan.blocks.empty())
    r.redistribution_s += cm.redistribution(plan.blocks.back(), Strategy::dp()).time_s;
  return r;
}

CostReport make_cost_report(const ExperimentSpec& spec, const Plan& plan) {
  SimRun run(spec);
  return make_cost_report(run, plan);
}

std::string to_json(const CostReport& r) {
  std::ostringstream o;
  o << "{\"model\":" << quote(r.model) << ",\"cluster\":" << quote(r.cluster)
    << ",\"plan\":" << quote(r.plan) << ",\"calibration\":" << quote(r.calibration)
    << ",\"world\":" << r.world << ",\"step_latency_s\":" << num(r.step_latency_s)
    << ",\"compute_s\":" << num(r.compute_s) << ",\"comm_s\":" << num(r.comm_s)
    << ",\"redistribution_s\":" << num(r.redistribution_s) << ",\"head_s\":" << num(r.head_s)
    << ",\"repartition_s\":" << num(r.repartition_s) << ",\"energy_j\":" << num(r.energy_j)
    << ",\"energy_source\":\"model\",\"tokens\":" << num(r.tokens)
    << ",\"peak_memory_bytes\":" << num(r.peak_memory_bytes)
    << ",\"memory_capacity\":" << num(r.memory_capacity)
    << ",\"oom\":" << (r.oom ? "true" : "false") << ",\"blocks\":[";
  for (size_t i = 0; i < r.blocks.size(); ++i) {
    const BlockReport& b = r.blocks[i];
    o << (i ? "," : "") << "{\"block\":" << b.block << ",\"kind\":" << quote(b.kind)
      << ",\"strategy\":" << quote(b.strategy) << ",\"flops_per_rank\":" << num(b.flops_per_rank)
      << ",\"fwd_s\":" << num(b.fwd_s) << ",\"bwd_s\":" << num(b.bwd_s)
      << ",\"tp_comm_s\":" << num(b.tp_comm_s) << ",\"grad_sync_s\":" << num(b.grad_sync_s)
      << ",\"comm_s\":" << num(b.comm_s) << ",\"redistribution_s\":" << num(b.redistribution_s)
      << ",\"comm_bytes_per_rank\":" << num(b.comm_bytes_per_rank)
      << ",\"state_bytes\":" << num(b.state_bytes)
      << ",\"activation_bytes\":" << num(b.activation_bytes)
      << ",\"energy_j\":" << num(b.energy_j) << ",\"collectives\":[";
    for (size_t j = 0; j < b.collectives.size(); ++j) {
      const CollectiveLine& c = b.collectives[j];
      o << (j ? "," : "") << "{\"what\":" << quote(c.what) << ",\"op\":" << quote(c.op)
        << ",\"axis\":" << quote(c.axis) << ",\"group_size\":" << c.group_size
        << ",\"forward\":" << (c.forward ? "true" : "false")
        << ",\"elements\":" << num(c.elements) << ",\"bytes_per_rank\":" << num(c.bytes_per_rank)
        << ",\"time_s\":" << num(c.time_s) << "}";
    }
    o << "]}";
  }
  o << "]}\n";
  return o.str();
}

std::string to_table(const CostReport& r, bool collectives) {
  std::ostringstream o;
  o << "model " << r.model << " on " << r.cluster << " (" << r.world << " ranks), calibration "
    << r.calibration << "\nplan " << r.plan << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%5s %-9s %-46s %9s %9s %9s %9s %9s %9s %9s\n", "block",
                "kind", "strategy", "GFLOP/rk", "fwd ms", "bwd ms", "comm ms", "redist", "mem GiB",
                "energy J");
  o << line;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (const auto& b : r.blocks) {
    std::snprintf(line, sizeof line, "%5d %-9s %-46s %9.2f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
                  b.block, b.kind.c_str(), b.strategy.c_str(), b.flops_per_rank / 1e9,
                  b.fwd_s * 1e3, b.bwd_s * 1e3, b.comm_s * 1e3, b.redistribution_s * 1e3,
                  (b.state_bytes + b.activation_bytes) / gib, b.energy_j);
    o << line;
    if (!collectives) continue;
    for (const auto& c : b.collectives) {
      std::snprintf(line, sizeof line, "        %-14s %-2s p=%-4d %-3s %10.3f MB/rank %9.3f ms  %s\n",
                    c.op.c_str(), c.axis.c_str(), c.group_size, c.forward ? "fwd" : "bwd",
                    c.bytes_per_rank / 1e6, c.time_s * 1e3, c.what.c_str());
      o << line;
    }
  }
  o << "\n"
    << "iteration      " << fmt("%10.3f ms", r.step_latency_s * 1e3) << "  (compute "
    << fmt("%.3f", r.compute_s * 1e3) << ", exposed comm " << fmt("%.3f", r.comm_s * 1e3)
    << ", redistribution " << fmt("%.3f", r.redistribution_s * 1e3) << ", embedding/head "
    << fmt("%.3f", r.head_s * 1e3) << ")\n"
    << "repartition    " << fmt("%10.3f ms", r.repartition_s * 1e3) << "\n"
    << "throughput     " << fmt("%10.1f tokens/s", r.step_latency_s > 0 ? r.tokens / r.step_latency_s : 0) << "\n"
    << "peak memory    " << fmt("%10.3f GiB/rank", r.peak_memory_bytes / gib) << " of "
    << fmt("%.3f GiB", r.memory_capacity / gib) << (r.oom ? "  OUT OF MEMORY" : "") << "\n"
    << "energy         " << fmt("%10.3f J", r.energy_j) << " (model)\n";
  return o.str();
}

}  // namespace shardgym
