#pragma once
// `tapegrad train`: its flags, the checks of their values and of the modes they make sense in, and the run or
// resume they start.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "train/cli/train_flags.h"

namespace tapegrad::cli {

/// Adds the train subcommand; `program` is argv[0], for the predict command it suggests at the end.
void add_train(CLI::App& app, TrainFlags& flags, const std::string& program);

/// The flag that sets a TrainOptions field ("model.d_ff" -> "--ff"): validate()'s names on the command line.
std::string flag_for(std::string_view field);

}  // namespace tapegrad::cli
