// The onceflow command line, as a function so that other programs can reuse it.
//
// Exit codes: 0 every check passed, 1 a violation was found, 2 bad input or usage.
#pragma once

#include <string_view>

#include "core/computation.h"

namespace onceflow {

// The onceflow command line with the built-in computations.
int cli_main(int argc, char** argv);
// The same command line with `registry`: a program with its own computations registers them
// and hands the registry here, and its pipelines get run, explore, replay and the rest.
int cli_main(int argc, char** argv, const ComputationRegistry& registry);
// Parses and checks the arguments as cli_main does, and runs nothing: 0 when they would run,
// 2 with the one-line error otherwise (for the fuzzer, fuzz/input_fuzz.cc).
int cli_check_arguments(int argc, char** argv);
// Whether `word` is one of the command line's commands ("run", "explore", ..., "help"): a
// program that is also something else (a test binary, testing::test_main) hands its
// arguments to cli_main when its first argument is one.
bool is_cli_command(std::string_view word);

}  // namespace onceflow
