// `shardgym suite`: agents trained on a suite's training instances and judged on its test
// instances (experiments/suite.h).
#include <algorithm>
#include <fstream>
#include <iostream>

#include "analysis/table.h"
#include "experiments/cli/commands.h"
#include "experiments/progress.h"
#include "experiments/suite.h"

namespace shardgym::cli {

namespace {

// Keeps the tasks named (in the suite's order); an unknown name is refused with the names
// the suite has. A run of some tasks merges with runs of the others by --from-json.
void keep_tasks(SuiteSpec& suite, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    bool known = false;
    for (const ExperimentSpec& t : suite.tasks) known = known || t.name == n;
    if (!known) {
      std::string have;
      for (const ExperimentSpec& t : suite.tasks) have += (have.empty() ? "" : ", ") + t.name;
      throw BadInput("--tasks: no task '" + n + "' in " + suite.path + " (it has: " + have + ")");
    }
  }
  std::vector<ExperimentSpec> tasks;
  std::vector<std::string> paths;
  for (size_t i = 0; i < suite.tasks.size(); ++i)
    if (std::find(names.begin(), names.end(), suite.tasks[i].name) != names.end()) {
      tasks.push_back(suite.tasks[i]);
      paths.push_back(suite.task_paths[i]);
    }
  suite.tasks = std::move(tasks);
  suite.task_paths = std::move(paths);
}

}  // namespace

int run_suite_command(const SuiteArgs& args, std::ostream& out, std::ostream& err) {
  BootstrapOptions bootstrap;
  bootstrap.seed = args.bootstrap_seed;
  if (!args.from_json.empty()) {
    if (!args.suite.empty()) throw BadInput("suite: give a suite file or --from-json, not both");
    const SuiteResult r = suite_from_json(args.from_json);
    out << (args.json ? suite_to_json(r, bootstrap)
                      : format_suite(r, args.markdown ? TableFormat::kMarkdown : TableFormat::kText,
                                     bootstrap));
    return 0;
  }
  if (args.suite.empty()) throw BadInput("suite: give a suite file (or --from-json FILE)");
  SuiteSpec suite = load_suite(args.suite);
  if (args.instances) {
    if (*args.instances < 1) throw BadInput("--instances: at least 1");
    if (size_t(*args.instances) < suite.test_instances.size())
      suite.test_instances.resize(size_t(*args.instances));
  }
  if (!args.tasks.empty()) keep_tasks(suite, split_agent_list(args.tasks));
  if (args.train_steps) suite.train_steps = *args.train_steps;
  if (args.training_seeds) suite.training_seeds = *args.training_seeds;
  const std::vector<std::string> agents = split_agent_list(args.agents);
  for (const std::string& id : agents) check_agent_id(id, "--agents");
  Progress progress(err, Progress::stream_is_tty(stderr));
  SuiteOptions options;
  options.bootstrap.seed = args.bootstrap_seed;
  options.on_progress = [&](const std::string& line) { progress.line(line); };
  options.references = !args.no_references;
  if (args.no_references && args.out.empty())
    throw BadInput("--no-references: give --out FILE (its runs are merged with the references' "
                   "by --from-json; alone they make no table)");
  if (args.no_references && agents.empty() && suite.agents.empty())
    throw BadInput("--no-references: no agents to run (--agents or the suite's `agents`)");
  const SuiteResult result = run_suite(suite, agents, options);
  const std::string json = suite_to_json(result, options.bootstrap);
  if (!args.out.empty()) {
    std::ofstream f(args.out);
    if (!(f << json)) throw std::runtime_error("cannot write " + args.out);
  }
  if (args.no_references) {
    out << "wrote " << args.out << " (no references: print the table with --from-json REFS.json "
        << args.out << ")\n";
    return 0;
  }
  if (args.json)
    out << json;
  else
    out << format_suite(result, args.markdown ? TableFormat::kMarkdown : TableFormat::kText,
                        options.bootstrap);
  return 0;
}

}  // namespace shardgym::cli
