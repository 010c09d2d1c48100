// Internal to runtime/live/bench: running a Python side of a benchmark (bench_live_eager.py,
// bench_pipeline_eager.py) and reading the JSON line it prints.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace shardgym::live {

// The source tree (SHARDGYM_SOURCE_DIR, else the build's), where the scripts are.
std::string bench_source_dir();
// Runs `command` (stdout and stderr together) and returns its output; throws
// std::runtime_error with the exit status and the output when it fails or prints no `marker`.
std::string run_python_json(const std::string& command, const std::string& marker);
// The numbers of the JSON list `"key": [...]` found after position `from` of `out`.
std::vector<double> json_list(const std::string& out, const std::string& key, size_t from);

}  // namespace shardgym::live
