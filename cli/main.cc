#include "cli/cli.h"

int main(int argc, char** argv) { return onceflow::cli_main(argc, argv); }
