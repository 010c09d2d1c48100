#include "datasets/trace_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "datasets/trace_reader.h"

namespace shardgym {

int TraceSummary::complete_episodes() const {
  return static_cast<int>(std::count_if(
      episodes.begin(), episodes.end(),
      [](const TraceEpisodeSummary& e) { return e.info.complete; }));
}

int64_t TraceSummary::total_steps() const {
  int64_t n = 0;
  for (const auto& e : episodes) {
    if (e.info.complete) n += e.info.steps;
  }
  return n;
}

double TraceSummary::mean_return() const {
  int n = complete_episodes();
  if (n == 0) return 0;
  double sum = 0;
  for (const auto& e : episodes) {
    if (e.info.complete) sum += e.episode_return;
  }
  return sum / n;
}

TraceSummary summarize_trace(const std::string& path) {
  TraceReader reader(path);
  TraceSummary s;
  s.path = path;
  s.attributes = reader.attributes();
  s.schema_version = s.attributes.version;
  s.num_strategies = static_cast<int>(reader.strategies().size());
  for (const auto& info : reader.episodes()) {
    TraceEpisodeSummary es;
    es.info = info;
    if (info.complete) {
      TraceEpisode ep = reader.read_episode(info.index);
      if (s.num_blocks == 0) {
        s.num_blocks = ep.num_blocks;
        s.world = ep.world;
        s.obs_dim = ep.obs_dim;
        s.action_dim = ep.action_dim;
      } else if (ep.num_blocks != s.num_blocks || ep.world != s.world ||
                 ep.obs_dim != s.obs_dim || ep.action_dim != s.action_dim) {
        // One trace is one config: every episode has the same widths.
        throw std::runtime_error(
            "trace '" + path + "': " + info.name + " has " + std::to_string(ep.num_blocks) +
            " blocks, " + std::to_string(ep.world) + " ranks, observations " +
            std::to_string(ep.obs_dim) + " and actions " + std::to_string(ep.action_dim) +
            " wide; the trace's first episode has " + std::to_string(s.num_blocks) + ", " +
            std::to_string(s.world) + ", " + std::to_string(s.obs_dim) + " and " +
            std::to_string(s.action_dim));
      }
      // Every plan id names an entry of the trace's strategy table.
      for (size_t k = 0; k < ep.plans.size(); ++k) {
        const int id = ep.plans[k];
        if (id < 0 || id >= s.num_strategies) {
          throw std::runtime_error(
              "trace '" + path + "': " + info.name + " step " +
              std::to_string(k / std::max(1, ep.num_blocks)) + " block " +
              std::to_string(k % std::max(1, ep.num_blocks)) + " has plan id " +
              std::to_string(id) + ", outside the trace's " + std::to_string(s.num_strategies) +
              " strategies");
        }
      }
      const int n = ep.steps();
      es.episode_return = ep.episode_return();
      for (int t = 0; t < n; ++t) {
        es.mean_step_latency_s += ep.step_latency_s[t] / n;
        es.total_repartition_s += ep.repartition_s[t];
        es.total_energy_j += ep.energy_j[t];
        es.total_tokens += ep.tokens[t];
      }
      for (double v : ep.peak_memory_bytes) {
        if (!std::isnan(v)) es.max_peak_memory_bytes = std::max(es.max_peak_memory_bytes, v);
      }
      if (n > 0) {
        es.terminated = ep.terminations[n - 1] != 0;
        es.truncated = ep.truncations[n - 1] != 0;
      }
    }
    s.episodes.push_back(std::move(es));
  }
  return s;
}

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

std::string describe_trace(const TraceSummary& s) {
  const TraceAttributes& a = s.attributes;
  std::ostringstream out;
  const auto lines = std::count(a.config.begin(), a.config.end(), '\n');
  out << "trace    " << s.path << "\n"
      << "schema   " << a.format << " v" << s.schema_version << "\n"
      << "env      " << a.env_id << "\n"
      << "created  " << a.created << "\n"
      << "git sha  " << (a.git_sha.empty() ? "(not recorded)" : a.git_sha) << "\n"
      << "host     " << a.host << "\n"
      << "config   " << lines << " lines, " << a.config.size() << " bytes\n"
      << "shape    " << s.num_blocks << " blocks, " << s.world << " ranks, " << s.obs_dim
      << " observation features, " << s.action_dim << " action entries, " << s.num_strategies
      << " strategies\n"
      << "episodes " << s.complete_episodes() << " complete, "
      << (s.episodes.size() - s.complete_episodes()) << " incomplete, " << s.total_steps()
      << " steps, mean return " << fmt("%.6g", s.mean_return()) << "\n";
  if (s.episodes.empty()) return out.str();
  out << "\n  episode      seed  agent         backend  steps      return  latency_s  "
         "energy_j   end\n";
  for (const auto& e : s.episodes) {
    char head[96];
    std::snprintf(head, sizeof head, "  %-10s %6llu  %-12.12s  %-7.7s", e.info.name.c_str(),
                  static_cast<unsigned long long>(e.info.seed), e.info.agent.c_str(),
                  e.info.backend.c_str());
    out << head;
    if (!e.info.complete) {
      out << "  incomplete (the writer stopped before the episode ended)";
      if (!e.info.error.empty()) out << ": " << first_line(e.info.error);
      out << "\n";
      continue;
    }
    char row[128];
    std::snprintf(row, sizeof row, "  %5d  %10.4g  %9.4g  %8.4g   %s", e.info.steps,
                  e.episode_return, e.mean_step_latency_s, e.total_energy_j,
                  e.terminated  ? "terminated"
                  : e.truncated ? "truncated"
                                : "cut");
    out << row;
    if (!e.info.error.empty()) {
      out << "  error at step " << e.info.error_step << ": " << first_line(e.info.error);
    }
    out << "\n";
  }
  return out.str();
}

std::string describe_trace(const std::string& path) {
  return describe_trace(summarize_trace(path));
}

namespace {


std::string json_number(double v) { return std::isfinite(v) ? fmt("%.17g", v) : "null"; }

}  // namespace

std::string to_json(const TraceSummary& s) {
  const TraceAttributes& a = s.attributes;
  std::ostringstream out;
  out << "{\"path\": " << json_string(s.path) << ", \"format\": " << json_string(a.format)
      << ", \"version\": " << s.schema_version << ", \"env_id\": " << json_string(a.env_id)
      << ", \"created\": " << json_string(a.created) << ", \"git_sha\": " << json_string(a.git_sha)
      << ", \"host\": " << json_string(a.host) << ", \"config\": " << json_string(a.config)
      << ", \"num_blocks\": " << s.num_blocks << ", \"world\": " << s.world
      << ", \"obs_dim\": " << s.obs_dim << ", \"action_dim\": " << s.action_dim
      << ", \"num_strategies\": " << s.num_strategies
      << ", \"complete_episodes\": " << s.complete_episodes()
      << ", \"total_steps\": " << s.total_steps()
      << ", \"mean_return\": " << json_number(s.mean_return()) << ", \"episodes\": [";
  for (size_t i = 0; i < s.episodes.size(); ++i) {
    const TraceEpisodeSummary& e = s.episodes[i];
    out << (i ? ", " : "") << "{\"name\": " << json_string(e.info.name)
        << ", \"index\": " << e.info.index
        << ", \"complete\": " << (e.info.complete ? "true" : "false")
        << ", \"seed\": " << e.info.seed << ", \"agent\": " << json_string(e.info.agent)
        << ", \"backend\": " << json_string(e.info.backend) << ", \"steps\": " << e.info.steps
        << ", \"return\": " << json_number(e.episode_return)
        << ", \"mean_step_latency_s\": " << json_number(e.mean_step_latency_s)
        << ", \"total_repartition_s\": " << json_number(e.total_repartition_s)
        << ", \"total_energy_j\": " << json_number(e.total_energy_j)
        << ", \"total_tokens\": " << json_number(e.total_tokens)
        << ", \"max_peak_memory_bytes\": " << json_number(e.max_peak_memory_bytes)
        << ", \"terminated\": " << (e.terminated ? "true" : "false")
        << ", \"truncated\": " << (e.truncated ? "true" : "false")
        << ", \"error\": " << json_string(e.info.error) << ", \"error_step\": " << e.info.error_step
        << "}";
  }
  out << "]}\n";
  return out.str();
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace shardgym
