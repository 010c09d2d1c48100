// `shardgym report RUN_DIR... --out DIR`: the figures and tables of python/shardgym/report.py,
// run with the build's Python. The figures are matplotlib's, so the work is Python's; this
// command finds the interpreter, puts the package and this build's extension on PYTHONPATH,
// checks the dependencies are there and hands the binary's own path to the module, which runs
// `shardgym inspect --json` on every trace (HDF5 parsed in a child process) before h5py opens
// it.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "experiments/cli/commands.h"

namespace shardgym::cli {
namespace {

namespace fs = std::filesystem;

// $SHARDGYM_PYTHON, else the .venv of the checkout this binary was built from (scripts/setup.sh).
std::string find_python() {
  if (const char* p = std::getenv("SHARDGYM_PYTHON"); p && *p) return p;
  return (fs::path(SHARDGYM_SOURCE_DIR) / ".venv" / "bin" / "python").string();
}

struct Outcome {
  int status = -1;     // exit status, or -1 when the process did not exit normally
  std::string output;  // stdout and stderr, when captured
};

// Runs argv[0] with `env` added to this process's environment; captures its output if asked.
Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            bool capture) {
  int fds[2] = {-1, -1};
  if (capture && pipe(fds) != 0) throw std::runtime_error("report: pipe() failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("report: fork() failed");
  if (pid == 0) {
    if (capture) {
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
    }
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  Outcome o;
  if (capture) {
    close(fds[1]);
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) o.output.append(buf, n);
    close(fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

}  // namespace

int run_report(const ReportArgs& args, std::ostream& out) {
  const std::string python = find_python();
  if (!fs::exists(python)) {
    const char* env = std::getenv("SHARDGYM_PYTHON");
    throw std::runtime_error(
        env && *env ? "report: $SHARDGYM_PYTHON names " + python + ", which does not exist"
                    : "report: no Python: $SHARDGYM_PYTHON is not set and " + python +
                          " does not exist (scripts/setup.sh creates it; or set SHARDGYM_PYTHON)");
  }
  std::string path = std::string(SHARDGYM_PYTHON_BUILD_DIR) + ":" +
                     (fs::path(SHARDGYM_SOURCE_DIR) / "python").string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> env = {"PYTHONPATH=" + path, "MPLBACKEND=Agg"};
  if (!ec) env.push_back("SHARDGYM_CLI=" + self.string());

  // The imports the report needs, before anything is drawn: a clear error instead of a trace.
  const Outcome check = run(
      {python, "-c", "import numpy, h5py, matplotlib, yaml, rliable, shardgym.report"}, env, true);
  if (check.status != 0) {
    std::string last = check.output;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.find_last_of('\n') + 1);
    throw std::runtime_error("report: " + python + " cannot run the report (" + last +
                             "); run scripts/setup.sh and scripts/build.sh, or set "
                             "SHARDGYM_PYTHON to a Python with python/requirements.txt");
  }
  std::vector<std::string> argv = {python, "-m", "shardgym.report"};
  argv.insert(argv.end(), args.run_dirs.begin(), args.run_dirs.end());
  argv.insert(argv.end(),
              {"--out", args.out, "--episode", std::to_string(args.episode), "--bootstrap-reps",
               std::to_string(args.bootstrap_reps), "--seed", std::to_string(args.seed)});
  if (args.skip_damaged) argv.push_back("--skip-damaged");
  out.flush();
  const Outcome o = run(argv, env, false);
  if (o.status == 2) throw BadInput("report: the traces were refused (message above)");
  if (o.status != 0) throw std::runtime_error("report: " + python + " -m shardgym.report failed");
  return 0;
}

}  // namespace shardgym::cli
