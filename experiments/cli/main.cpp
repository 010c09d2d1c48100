// `shardgym`: the command line of the testbed. Each subcommand is a thin layer over a library
// call (config loader, training runner, trace reader, cost report, benchmark) so that tests
// exercise the same code without a process in between.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad input (command line or config), 3 live figures
// refused because the machine was too noisy to measure on (experiments/noise_gate.h). Errors are
// printed as `shardgym: <file>:<line>: <key>: <reason>` for configs, `shardgym: <reason>`
// otherwise.
#include <malloc.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/command_table.h"
#include "experiments/cli/commands.h"
#include "experiments/config.h"
#include "runtime/core/training_run.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace shardgym::cli;
  // LibTorch allocates and frees large temporaries (PPO's [rows, blocks, catalog] logits) on
  // every op; with glibc's defaults each one is a fresh mmap and page-faults anew (a third
  // of `bench learn`'s time went to page faults). Keeping them on the heap made it ~5x faster.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{
      "ShardGym: a testbed for adaptive tensor parallelism. Agents choose per-block partition\n"
      "strategies of a (simulated or live) tensor-parallel GPT training run.",
      "shardgym"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kVersion));
  app.footer(
      "Configs: experiments/*.yaml (schema: docs/configs.md). Exit codes: 0 ok, "
      "1 runtime failure, 2 bad input.");

  Context context;
  for (int i = 0; i < argc; ++i) context.command_line += (i ? " " : "") + std::string(argv[i]);
  const std::vector<Command> commands = add_commands(app, context);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "shardgym: " << e.what() << "\nRun with --help for more information.\n";
    return kExitBadInput;
  }

  auto dispatch = [&]() -> int {
    for (const Command& command : commands)
      if (command.run && *command.app) return command.run(std::cout, std::cerr);
    return kExitOk;
  };
  int rc = kExitOk;
  try {
    rc = dispatch();
  } catch (const shardgym::ConfigError& e) {
    std::cerr << "shardgym: " << e.what() << "\n";
    rc = kExitBadInput;
  } catch (const BadInput& e) {
    std::cerr << "shardgym: " << e.what() << "\n";
    rc = kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "shardgym: error: " << e.what() << "\n";
    rc = kExitFailure;
  }
  // What went wrong where nothing could throw (a live rank that stalled after the last
  // episode and was killed) still fails the command.
  for (const std::string& f : shardgym::take_late_failures()) {
    std::cerr << "shardgym: error: " << f << "\n";
    if (rc == kExitOk) rc = kExitFailure;
  }
  return rc;
}
