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


}  // namespace tapegrad::cli
