#include "runtime/sim/cost_report.h"

#include <algorithm>
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
  const IterationBreakdown bd = run.breakdown(plan);
  const CostModel& cm = run.cost_model();
  const HeadCost head = cm.head_cost();
  const double m = std::max(1, bd.pipeline.micro_batches);
  CostReport r;
  r.model = run.model().name;
  r.cluster = run.cluster().name;
  r.plan = plan.to_string();
  r.calibration = cm.calibration().source();
  r.measured_calibration = run.cluster().calibration.path;
  r.world = cm.world();
  r.stages = std::max(1, bd.pipeline.stages);
  r.micro_batches = static_cast<int>(m);
  r.virtual_stages = bd.pipeline.virtual_stages;
  r.schedule = schedule_name(bd.pipeline.schedule);
  r.schedule_s = bd.schedule_s;
  r.bubble_fraction = bd.bubble_fraction;
  r.p2p_s = bd.p2p_s;
  r.step_latency_s = est->step_latency_s;
  r.repartition_s = est->repartition_s;
  r.repartition_bytes = est->repartition_bytes;
  r.repartition_peak_bytes = est->repartition_peak_bytes;
  r.energy_j = est->energy_j;
  r.tokens = est->tokens;
  r.peak_memory_bytes = est->peak_memory_bytes.empty() ? 0 : est->peak_memory_bytes[0];
  for (double b : est->peak_memory_bytes) r.peak_memory_bytes = std::max(r.peak_memory_bytes, b);
  r.memory_capacity = head.memory_capacity;
  r.oom = est->oom;
  r.head_s = m * bd.head_s + bd.head_sync_s;
  double tail = 0;
  for (size_t s = 0; s < bd.stages.size(); ++s) {
    const StageTimes& t = bd.stages[s];
    StageReport sr;
    sr.stage = static_cast<int>(s);
    sr.first_block = t.first_block, sr.blocks = t.blocks;
    sr.first_rank = t.first_rank, sr.ranks = t.ranks;
    sr.micro_batch_s = t.micro_batch_s;
    sr.host_s = t.host_s;
    sr.grad_sync_s = t.grad_sync_s, sr.param_gather_s = t.param_gather_s;
    sr.optimizer_s = t.optimizer_s, sr.tail_s = t.tail_s;
    sr.in_flight = t.in_flight;
    sr.peak_memory_bytes = t.peak_memory_bytes, sr.capacity_bytes = t.capacity_bytes;
    tail = std::max(tail, t.tail_s);
    r.stage_reports.push_back(sr);
  }
  r.tail_s = tail + bd.head_sync_s;
  for (int b = 0; b < plan.size(); ++b) {
    const BlockKind kind = ModelSpec::block_kind(b);
    const Strategy& s = plan.blocks[b];
    const BlockCost& c = bd.blocks[b];
    BlockReport br;
    br.block = b;
    br.stage = bd.block_stage[b];
    br.kind = block_kind_name(kind);
    br.strategy = s.to_string();
    br.flops_per_rank = m * c.flops_per_rank;
    br.fwd_s = m * c.fwd_s, br.bwd_s = m * c.bwd_s;
    br.tp_comm_s = m * (c.tp_comm_fwd_s + c.tp_comm_bwd_s);
    br.grad_sync_s = c.grad_sync_s;
    br.comm_s = m * c.comm_s + c.grad_sync_s;  // exposed TP communication + gradient reduction
    br.state_bytes = c.state_bytes;
    const bool after_recompute = kind == BlockKind::kMlp && plan.blocks[b - 1].recompute;
    br.activation_bytes = after_recompute ? c.activation_bytes_prev_recompute : c.activation_bytes;
    br.redistribution_s = m * bd.redistribution_s[b];
    br.energy_j = head.idle_power_w * (br.fwd_s + br.bwd_s + br.comm_s) + m * c.busy_energy_j +
                  m * c.link_energy_j;
    for (const auto& cc : c.collectives) {
      CollectiveLine l;
      l.what = cc.collective.what ? cc.collective.what : "";
      l.op = coll_op_name(cc.collective.op);
      l.axis = comm_axis_name(cc.collective.axis);
      l.group_size = cc.collective.group_size;
      l.forward = cc.collective.forward;
      const bool per_iteration = cc.collective.axis == CommAxis::kData;
      l.elements = cc.collective.elements * (per_iteration ? 1 : m);
      l.bytes_per_rank = cc.bytes_per_rank * (per_iteration ? 1 : m);
      l.time_s = cc.time_s * (per_iteration ? 1 : m);
      br.comm_bytes_per_rank += l.bytes_per_rank;
      br.collectives.push_back(l);
    }
    StageReport& sr = r.stage_reports[br.stage];
    sr.compute_s += br.fwd_s + br.bwd_s;
    sr.comm_s += m * c.comm_s;
    r.compute_s += br.fwd_s + br.bwd_s;
    r.comm_s += br.comm_s;
    r.redistribution_s += br.redistribution_s;
    r.blocks.push_back(std::move(br));
  }
  r.redistribution_s += m * bd.head_redistribution_s;
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
    << ",\"measured_calibration\":" << quote(r.measured_calibration)
    << ",\"world\":" << r.world << ",\"pipeline\":{\"stages\":" << r.stages
    << ",\"micro_batches\":" << r.micro_batches << ",\"schedule\":" << quote(r.schedule)
    << ",\"virtual_stages\":" << r.virtual_stages << ",\"schedule_s\":" << num(r.schedule_s)
    << ",\"bubble_fraction\":" << num(r.bubble_fraction) << ",\"p2p_s\":" << num(r.p2p_s)
    << ",\"tail_s\":" << num(r.tail_s) << "}"
    << ",\"step_latency_s\":" << num(r.step_latency_s)
    << ",\"compute_s\":" << num(r.compute_s) << ",\"comm_s\":" << num(r.comm_s)
    << ",\"redistribution_s\":" << num(r.redistribution_s) << ",\"head_s\":" << num(r.head_s)
    << ",\"repartition_s\":" << num(r.repartition_s)
    << ",\"repartition_bytes\":" << num(r.repartition_bytes)
    << ",\"repartition_peak_bytes\":" << num(r.repartition_peak_bytes)
    << ",\"energy_j\":" << num(r.energy_j)
    << ",\"energy_source\":\"model\",\"tokens\":" << num(r.tokens)
    << ",\"peak_memory_bytes\":" << num(r.peak_memory_bytes)
    << ",\"memory_capacity\":" << num(r.memory_capacity)
    << ",\"oom\":" << (r.oom ? "true" : "false") << ",\"stages\":[";
  for (size_t i = 0; i < r.stage_reports.size(); ++i) {
    const StageReport& st = r.stage_reports[i];
    o << (i ? "," : "") << "{\"stage\":" << st.stage << ",\"first_block\":" << st.first_block
      << ",\"blocks\":" << st.blocks << ",\"first_rank\":" << st.first_rank
      << ",\"ranks\":" << st.ranks << ",\"micro_batch_s\":" << num(st.micro_batch_s)
      << ",\"host_s\":" << num(st.host_s) << ",\"compute_s\":" << num(st.compute_s)
      << ",\"comm_s\":" << num(st.comm_s)
      << ",\"grad_sync_s\":" << num(st.grad_sync_s)
      << ",\"param_gather_s\":" << num(st.param_gather_s)
      << ",\"optimizer_s\":" << num(st.optimizer_s) << ",\"tail_s\":" << num(st.tail_s)
      << ",\"in_flight\":" << num(st.in_flight)
      << ",\"peak_memory_bytes\":" << num(st.peak_memory_bytes)
      << ",\"capacity_bytes\":" << num(st.capacity_bytes) << "}";
  }
  o << "],\"blocks\":[";
  for (size_t i = 0; i < r.blocks.size(); ++i) {
    const BlockReport& b = r.blocks[i];
    o << (i ? "," : "") << "{\"block\":" << b.block << ",\"stage\":" << b.stage
      << ",\"kind\":" << quote(b.kind)
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
  const bool staged = r.stages > 1;
  o << "model " << r.model << " on " << r.cluster << " (" << r.world << " ranks), efficiency table "
    << r.calibration << ", measured calibration "
    << (r.measured_calibration.empty() ? std::string("none") : r.measured_calibration)
    << "\nplan " << r.plan << "\n\n";
  char line[320];
  std::snprintf(line, sizeof line, "%5s %s%-9s %-46s %9s %9s %9s %9s %9s %9s %9s\n", "block",
                staged ? "stage " : "", "kind", "strategy", "GFLOP/rk", "fwd ms", "bwd ms",
                "comm ms", "redist", "mem GiB", "energy J");
  o << line;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (const auto& b : r.blocks) {
    char stage[16] = "";
    if (staged) std::snprintf(stage, sizeof stage, "%5d ", b.stage);
    std::snprintf(line, sizeof line, "%5d %s%-9s %-46s %9.2f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
                  b.block, stage, b.kind.c_str(), b.strategy.c_str(), b.flops_per_rank / 1e9,
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
  o << "\n";
  if (staged) {
    o << "pipeline       " << r.stages << " stages, " << r.micro_batches << " micro-batches, "
      << r.schedule;
    if (r.schedule == "interleaved") o << " (v=" << r.virtual_stages << ")";
    o << ", bubble " << fmt("%.1f %%", 100 * r.bubble_fraction) << " of equal stages\n";
    std::snprintf(line, sizeof line, "%5s %-9s %-11s %11s %10s %10s %10s %10s %10s %9s %15s\n",
                  "stage", "blocks", "ranks", "mb ms", "host ms", "compute ms", "comm ms",
                  "DP+opt ms", "tail ms", "in flight", "mem GiB / cap");
    o << line;
    for (const auto& st : r.stage_reports) {
      char blocks[24], ranks[24];
      std::snprintf(blocks, sizeof blocks, "%d-%d", st.first_block, st.first_block + st.blocks - 1);
      std::snprintf(ranks, sizeof ranks, "%d-%d", st.first_rank, st.first_rank + st.ranks - 1);
      std::snprintf(line, sizeof line,
                    "%5d %-9s %-11s %11.3f %10.3f %10.3f %10.3f %10.3f %10.3f %9.2f %7.2f / %5.1f\n",
                    st.stage, blocks, ranks, st.micro_batch_s * 1e3, st.host_s * 1e3,
                    st.compute_s * 1e3,
                    st.comm_s * 1e3,
                    (st.grad_sync_s + st.param_gather_s + st.optimizer_s) * 1e3,
                    st.tail_s * 1e3, st.in_flight, st.peak_memory_bytes / gib,
                    st.capacity_bytes / gib);
      o << line;
    }
    o << "schedule       " << fmt("%10.3f ms", r.schedule_s * 1e3)
      << "  (+ stage-to-stage transfers " << fmt("%.3f", r.p2p_s * 1e3)
      << ", exposed DP tail and head sync "
      << fmt("%.3f", r.tail_s * 1e3) << ")\n";
  } else if (r.micro_batches > 1 || r.tail_s > 0) {
    o << "micro-batches  " << r.micro_batches << "; exposed DP tail and head sync "
      << fmt("%.3f ms", r.tail_s * 1e3) << "\n";
  }
  if (!staged && !r.stage_reports.empty() && r.stage_reports[0].host_s > 0) {
    const StageReport& st = r.stage_reports[0];
    o << "host issue     " << fmt("%10.3f ms", st.host_s * 1e3)
      << " per micro-batch (a micro-batch " << fmt("%.3f ms", st.micro_batch_s * 1e3)
      << (st.host_s >= st.micro_batch_s ? ": bound by its host)\n"
                                        : ": its GPU time and this, combined by the host's "
                                          "overlap, docs/design.md §4)\n");
  }
  o << "iteration      " << fmt("%10.3f ms", r.step_latency_s * 1e3) << (staged ? "  (Σ stages: compute " : "  (compute ")
    << fmt("%.3f", r.compute_s * 1e3) << ", comm " << fmt("%.3f", r.comm_s * 1e3)
    << " (exposed TP, DP reduction before overlap), redistribution " << fmt("%.3f", r.redistribution_s * 1e3)
    << ", embedding/head " << fmt("%.3f", r.head_s * 1e3) << ")\n"
    << "repartition    " << fmt("%10.3f ms", r.repartition_s * 1e3)
    << (r.repartition_bytes > 0
            ? fmt("  (%.3f GiB received; in transit at most ", r.repartition_bytes / gib) +
                  fmt("%.3f GiB/rank on top of the state)", r.repartition_peak_bytes / gib)
            : std::string())
    << "\n"
    << "throughput     " << fmt("%10.1f tokens/s", r.step_latency_s > 0 ? r.tokens / r.step_latency_s : 0) << "\n"
    << "peak memory    " << fmt("%10.3f GiB/rank", r.peak_memory_bytes / gib) << " of "
    << fmt("%.3f GiB", r.memory_capacity / gib) << (r.oom ? "  OUT OF MEMORY" : "") << "\n"
    << "energy         " << fmt("%10.3f J", r.energy_j) << " (model)\n";
  return o.str();
}

}  // namespace shardgym
