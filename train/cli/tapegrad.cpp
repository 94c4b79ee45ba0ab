// The `tapegrad` executable: the command line of train/cli/cli.h with the built-in components.
#include "train/cli/cli.h"

int main(int argc, char** argv) { return tapegrad::cli::main(argc, argv); }
