// onceflow's command line with your computations.
//
// Link onceflow::cli, register your functions by the names your pipeline specs use, and
// hand the registry to cli_main: you get run, explore, replay, shrink, explain, real, list and
// mutants for your pipelines, with every checker and your own checks, assertions and bug
// switches, and replay lines that name this program.
#include <onceflow/cli/cli.h>
#include <onceflow/core/builtin.h>

#include "my_computations.h"

int main(int argc, char** argv) {
  onceflow::ComputationRegistry registry;
  onceflow::builtin::register_all(registry);  // optional: keep the built-ins too
  my::register_my_computations(registry);
  registry.set_scenario_dir(MY_SCENARIOS);  // `list` and `mutants` use this project's scenarios
  return onceflow::cli_main(argc, argv, registry);
}
