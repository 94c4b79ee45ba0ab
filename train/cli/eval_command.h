#pragma once
// `tapegrad eval`: loss, accuracy and confusion matrix of a checkpoint on a built-in task or a TSV file.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "train/data/tasks.h"
#include "train/train_options.h"

namespace tapegrad::cli {

struct EvalFlags {
  std::string checkpoint, task, data;
  TaskOptions task_options;
  uint64_t seed = 0;
  int64_t valid_size = TrainOptions().valid_size;
  bool json = false;
};

void add_eval(CLI::App& app, EvalFlags& flags);

}  // namespace tapegrad::cli
