// The table of `shardgym` subcommands (command_table.cpp): each entry registers its options on
// the parsed command line and carries the call that runs it.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace shardgym::cli {

// What a command may need from the process beyond its options.
struct Context {
  std::string command_line;  // argv joined by spaces (calibration files record it)
};

struct Command {
  CLI::App* app = nullptr;  // the subcommand, owned by the parent CLI::App
  // Runs the command with the options parsed into it; empty for a group (`bench`).
  std::function<int(std::ostream& out, std::ostream& err)> run;
};

// Registers every subcommand on `app`; the commands to run are those whose `*app` was parsed.
std::vector<Command> add_commands(CLI::App& app, const Context& context);

}  // namespace shardgym::cli
