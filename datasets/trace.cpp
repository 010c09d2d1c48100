#include "datasets/trace.h"

#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <sys/utsname.h>

#include "runtime/core/catalog.h"

namespace shardgym {

TraceMetadata make_trace_metadata(const ExperimentSpec& spec, const std::string& git_sha) {
  TraceMetadata meta;
  meta.env_id = spec.env_id;
  meta.config = spec.source_text;
  if (!spec.source_path.empty()) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(spec.source_path, ec);
    meta.config_path = ec ? spec.source_path : abs.lexically_normal().string();
  }
  meta.git_sha = git_sha;
  meta.agent = spec.agent.id;
  meta.world = spec.cluster.world_size();
  StrategyCatalog catalog(spec.model, meta.world, spec.catalog);
  for (const Strategy& s : catalog.entries()) meta.strategies.push_back(s.to_string());
  return meta;
}

std::string describe_host() {
  std::string out;
  struct utsname u;
  if (uname(&u) == 0) {
    out = std::string(u.sysname) + " " + u.nodename + " " + u.release + " " + u.machine;
  } else {
    out = "unknown host";
  }
  return out + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs";
}

std::string iso_time_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double TraceEpisode::episode_return() const {
  double sum = 0;
  for (double r : rewards) sum += r;
  return sum;
}

namespace {

std::vector<double> row(const std::vector<double>& data, int width, int t) {
  return std::vector<double>(data.begin() + static_cast<size_t>(t) * width,
                             data.begin() + static_cast<size_t>(t + 1) * width);
}

}  // namespace

Measurement TraceEpisode::measurement(int t) const {
  if (t < 0 || t >= steps()) {
    throw std::out_of_range("TraceEpisode " + info.name + ": step " + std::to_string(t) +
                            " outside [0, " + std::to_string(steps()) + ")");
  }
  Measurement m;
  m.step_latency_s = step_latency_s[t];
  m.repartition_s = repartition_s[t];
  m.repartition_bytes = repartition_bytes[t];
  m.repartition_peak_bytes = repartition_peak_bytes[t];
  m.energy_j = energy_j[t];
  m.tokens = tokens[t];
  m.loss = loss[t];
  m.block_fwd_s = row(block_fwd_s, num_blocks, t);
  m.block_bwd_s = row(block_bwd_s, num_blocks, t);
  m.block_comm_s = row(block_comm_s, num_blocks, t);
  m.peak_memory_bytes = row(peak_memory_bytes, world, t);
  m.ok = ok[t] != 0;
  m.oom = oom[t] != 0;
  if (!m.ok) m.error = t == info.error_step ? info.error : "recorded step failed";
  m.latency_source = latency_source;
  m.memory_source = memory_source;
  m.energy_source = energy_source;
  return m;
}

Plan TraceEpisode::plan(int t, const std::vector<std::string>& strategies) const {
  if (t < 0 || t >= steps()) {
    throw std::out_of_range("TraceEpisode " + info.name + ": step " + std::to_string(t) +
                            " outside [0, " + std::to_string(steps()) + ")");
  }
  Plan p;
  for (int b = 0; b < num_blocks; ++b) {
    int id = plans[static_cast<size_t>(t) * num_blocks + b];
    if (id < 0 || id >= static_cast<int>(strategies.size())) {
      throw std::runtime_error("TraceEpisode " + info.name + ": step " + std::to_string(t) +
                               " block " + std::to_string(b) + " has strategy id " +
                               std::to_string(id) + ", the table has " +
                               std::to_string(strategies.size()) + " entries");
    }
    p.blocks.push_back(Strategy::parse(strategies[id]));
  }
  return p;
}

}  // namespace shardgym
