// my-tapegrad: the whole tapegrad command line (train, eval, predict, gradcheck, bench), knowing the
// "rmsnorm" norm of rmsnorm.cpp, which registers itself when the program loads. Nothing else is needed.
#include "train/cli/cli.h"

int main(int argc, char** argv) { return tapegrad::cli::main(argc, argv); }
