// An onceflow command line with a computation of its own.
//
// Build it next to your code, link onceflow_cli, register your functions by the names your
// pipeline specs use, and hand the registry to cli_main: you get run, explore, replay,
// shrink, explain, list and mutants for your pipelines, with every checker.
#include "cli/cli.h"
#include "core/builtin.h"
#include "longest_word.h"

int main(int argc, char** argv) {
  onceflow::ComputationRegistry registry;
  onceflow::builtin::register_all(registry);  // optional: keep the built-ins too
  example::register_longest_word(registry);
  return onceflow::cli_main(argc, argv, registry);
}
