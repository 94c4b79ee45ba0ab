#pragma once
// The tapegrad command line as a library: train, eval, predict, gradcheck, bench, each with --help.
// The `tapegrad` executable is this function alone; a user's program that registers its own components
// (nn/components.h) or gradient checks and then calls it is a full tapegrad that knows them by name.
namespace tapegrad::cli {

/// Parses argv and runs the subcommand. Returns the process exit code: 0 on success, 1 after an error
/// (one line on stderr naming the subcommand and what is wrong), 2 for a bad flag, 128 + signal when a
/// run was interrupted by SIGINT or SIGTERM after saving its checkpoint.
int main(int argc, char** argv);

}  // namespace tapegrad::cli
