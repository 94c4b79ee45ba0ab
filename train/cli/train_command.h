#pragma once
// `tapegrad train`: its flags, the checks of their values and of the modes they make sense in, and the run or
// resume they start.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "train/cli/train_flags.h"

namespace tapegrad::cli {

/// Adds the train subcommand.
void add_train(CLI::App& app, TrainFlags& flags);


}  // namespace tapegrad::cli
