// A suite's results as JSON (suite_to_json) and back (suite_from_json): the tables of runs
// made apart (a task, an agent at a time) printed together (docs/suite.md).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "analysis/table.h"
#include "datasets/trace_summary.h"
#include "experiments/config.h"
#include "experiments/config_parts.h"
#include "experiments/suite.h"
#include "experiments/yaml_field.h"

namespace shardgym {

std::string suite_to_json(const SuiteResult& r, const BootstrapOptions& b) {
  auto num = [](double x) { return std::isfinite(x) ? fixed(x, 6) : std::string("null"); };
  auto ci = [&](const Interval& c) {
    return "{\"point\": " + num(c.point) + ", \"low\": " + num(c.low) + ", \"high\": " +
           num(c.high) + ", \"n\": " + std::to_string(c.n) + "}";
  };
  auto row_json = [&](const SuiteRow& row) {
    return "{\"task\": " + json_string(row.task) + ", \"agent\": " + json_string(row.agent) +
           ", \"runs\": " + std::to_string(row.runs) + ", \"vs_megatron\": " +
           ci(row.vs_megatron) + ", \"vs_hindsight\": " + ci(row.vs_hindsight) +
           ", \"seed_low\": " + num(row.seed_low) + ", \"seed_high\": " + num(row.seed_high) +
           ", \"gain_share\": " + num(row.gain_share) + ", \"headroom\": " + num(row.headroom) +
           ", \"repartition_s\": " + num(row.repartition_s) + ", \"train_wall_s\": " +
           num(row.train_wall_s) + ", \"eval_wall_s\": " + num(row.eval_wall_s) +
           ", \"failed\": " + std::to_string(row.failed) + "}";
  };
  std::ostringstream out;
  out << "{\"suite\": " << json_string(r.name) << ", \"test_instances\": [";
  for (size_t i = 0; i < r.test_instances.size(); ++i)
    out << (i ? ", " : "") << r.test_instances[i];
  out << "], \"agents\": [";
  for (size_t i = 0; i < r.agents.size(); ++i) out << (i ? ", " : "") << json_string(r.agents[i]);
  out << "],\n \"rows\": [";
  const std::vector<SuiteRow> rows = suite_rows(r, b);
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n  " : "\n  ") << row_json(rows[i]);
  out << "],\n \"overall\": [";
  const std::vector<SuiteRow> overall = suite_overall(r, b);
  for (size_t i = 0; i < overall.size(); ++i) out << (i ? ",\n  " : "\n  ") << row_json(overall[i]);
  out << "],\n \"runs\": [";
  bool first = true;
  for (const SuiteTask& t : r.tasks)
    for (const SuiteRun& run : t.runs) {
      out << (first ? "\n  " : ",\n  ") << "{\"task\": " << json_string(t.name)
          << ", \"agent\": " << json_string(run.agent) << ", \"training_seed\": "
          << run.training_seed << ", \"train_wall_s\": " << num(run.train_wall_s)
          << ", \"train_env_steps\": " << run.train_env_steps << "}";
      first = false;
    }
  out << "],\n \"episodes\": [";
  first = true;
  for (const SuiteTask& t : r.tasks)
    for (const SuiteRun& run : t.runs)
      for (const SuiteEpisode& e : run.episodes) {
        out << (first ? "\n  " : ",\n  ") << "{\"task\": " << json_string(t.name)
            << ", \"agent\": " << json_string(run.agent) << ", \"training_seed\": "
            << run.training_seed << ", \"instance\": " << e.instance << ", \"throughput\": "
            << num(e.throughput) << ", \"repartition_s\": " << num(e.repartition_s)
            << ", \"wall_s\": " << num(e.wall_s) << ", \"failed\": " << (e.failed ? "true" : "false")
            << "}";
        first = false;
      }
  out << "]}\n";
  return out.str();
}

namespace {

SuiteResult read_suite_json(const std::string& path) {
  using namespace config_detail;
  const std::string text = read_config_text(path, path, "", 0);
  YamlField root(parse_yaml_text(text, path), path, "", 1);  // JSON is YAML
  root.expect_map();
  SuiteResult r;
  r.name = root.child("suite").as_string();
  const YamlField inst = root.child("test_instances"), agents = root.child("agents");
  for (size_t i = 0; i < inst.size(); ++i) r.test_instances.push_back(inst.at(i).as_int(0));
  for (size_t i = 0; i < agents.size(); ++i) r.agents.push_back(agents.at(i).as_string());
  auto run_of = [&](const YamlField& f) -> SuiteRun& {
    const std::string task = f.child("task").as_string();
    if (r.tasks.empty() || r.tasks.back().name != task) r.tasks.push_back({task, {}});
    SuiteTask& t = r.tasks.back();
    const std::string agent = f.child("agent").as_string();
    const int seed = f.child("training_seed").as_int(-1);
    for (SuiteRun& run : t.runs)
      if (run.agent == agent && run.training_seed == seed) return run;
    t.runs.push_back({});
    t.runs.back().agent = agent;
    t.runs.back().training_seed = seed;
    return t.runs.back();
  };
  const YamlField runs = root.child("runs"), episodes = root.child("episodes");
  for (size_t i = 0; i < runs.size(); ++i) {
    SuiteRun& run = run_of(runs.at(i));
    run.train_wall_s = runs.at(i).child("train_wall_s").as_double(0);
    run.train_env_steps = runs.at(i).child("train_env_steps").as_int(0);
  }
  std::map<std::string, size_t> task_index;
  for (size_t i = 0; i < r.tasks.size(); ++i) task_index[r.tasks[i].name] = i;
  for (size_t i = 0; i < episodes.size(); ++i) {
    const YamlField e = episodes.at(i);
    auto t = task_index.find(e.child("task").as_string());
    if (t == task_index.end()) e.child("task").fail("a task with no entry in `runs`");
    SuiteRun* run = nullptr;
    for (SuiteRun& x : r.tasks[t->second].runs)
      if (x.agent == e.child("agent").as_string() &&
          x.training_seed == e.child("training_seed").as_int(-1))
        run = &x;
    if (!run) e.child("agent").fail("a run with no entry in `runs`");
    SuiteEpisode ep;
    ep.instance = static_cast<uint64_t>(e.child("instance").as_int(0));
    ep.throughput = e.child("throughput").as_double(0);
    ep.repartition_s = e.child("repartition_s").as_double(0);
    ep.wall_s = e.child("wall_s").as_double(0);
    ep.failed = e.child("failed").as_bool();
    run->episodes.push_back(ep);
  }
  // Every run must cover the test instances in order, or the rows would pair other episodes.
  for (const SuiteTask& t : r.tasks)
    for (const SuiteRun& run : t.runs) {
      bool same = run.episodes.size() == r.test_instances.size();
      for (size_t i = 0; same && i < run.episodes.size(); ++i)
        same = run.episodes[i].instance == r.test_instances[i];
      if (!same)
        root.child("episodes").fail("task " + t.name + ", agent " + run.agent +
                                    ": the episodes are not one per test instance, in order");
    }
  return r;
}

}  // namespace

SuiteResult suite_from_json(const std::vector<std::string>& paths) {
  if (paths.empty()) throw std::invalid_argument("suite_from_json: no files");
  SuiteResult r = read_suite_json(paths.front());
  for (size_t f = 1; f < paths.size(); ++f) {
    const SuiteResult more = read_suite_json(paths[f]);
    if (more.name != r.name || more.test_instances != r.test_instances)
      throw ConfigError(paths[f], "test_instances", 0,
                        "another suite or other test instances than " + paths.front() +
                            "; only runs of the same instances can share a table");
    for (const std::string& a : more.agents)
      if (std::find(r.agents.begin(), r.agents.end(), a) == r.agents.end()) r.agents.push_back(a);
    for (const SuiteTask& t : more.tasks) {
      auto same = std::find_if(r.tasks.begin(), r.tasks.end(),
                               [&](const SuiteTask& x) { return x.name == t.name; });
      if (same == r.tasks.end()) {
        r.tasks.push_back(t);
        continue;
      }
      for (const SuiteRun& run : t.runs) {
        for (const SuiteRun& x : same->runs)
          if (x.agent == run.agent && x.training_seed == run.training_seed)
            throw ConfigError(paths[f], "runs", 0,
                              "task " + t.name + ", agent " + run.agent +
                                  " is also in an earlier file");
        same->runs.push_back(run);
      }
    }
  }
  // The references first, in their order, so that the tables read the same however merged.
  std::vector<std::string> ordered;
  for (const char* ref : kSuiteReferences) {
    if (std::find(r.agents.begin(), r.agents.end(), ref) == r.agents.end())
      throw ConfigError(paths.front(), "agents", 0,
                        std::string("no ") + ref +
                            " runs in these files: a table needs the references (run the "
                            "suite without --no-references, and pass that JSON too)");
    ordered.push_back(ref);
  }
  for (const std::string& a : r.agents)
    if (std::find(ordered.begin(), ordered.end(), a) == ordered.end()) ordered.push_back(a);
  r.agents = ordered;
  for (const SuiteTask& t : r.tasks)
    for (const char* ref : kSuiteReferences)
      if (!find_suite_run(t, ref))
        throw ConfigError(paths.front(), "runs", 0, "task " + t.name + " has no " + ref + " run");
  return r;
}

}  // namespace shardgym
