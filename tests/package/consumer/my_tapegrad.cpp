// A user's own program that is the whole tapegrad command line (train/cli/cli.h): what a project with
// components of its own would register before handing over argv.
#include "train/cli/cli.h"

int main(int argc, char** argv) { return tapegrad::cli::main(argc, argv); }
