// The onceflow command line, as a function so that other programs can reuse it.
//
// Exit codes: 0 every check passed, 1 a violation was found, 2 bad input or usage.
#pragma once

namespace onceflow {

int cli_main(int argc, char** argv);

}  // namespace onceflow
