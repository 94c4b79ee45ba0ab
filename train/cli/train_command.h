#pragma once
// `tapegrad train`: its flags, the checks of their values and of the modes they make sense in, and the run or
// resume they start.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "train/parallel/communicator.h"
#include "train/parallel/data_parallel.h"
#include "train/parallel/mpi/launch.h"
#include "train/train_options.h"

namespace tapegrad::cli {

/// What `tapegrad train` was given; the data-parallel part is filled in as the ranks connect.
struct TrainFlags {
  TrainOptions options;
  std::string task = "majority", resume;
  bool no_shuffle = false, json = false;
  // Data parallelism: how mpirun started this process, the ranks once connected, and their settings.
  Launch launch = launch_from_environment();
  std::unique_ptr<Communicator> ranks;
  DataParallelOptions data_parallel;
  bool no_overlap = false;
  double comm_timeout = 60;
};

/// Adds the train subcommand; `program` is argv[0], for the predict command it suggests at the end.
void add_train(CLI::App& app, TrainFlags& flags, const std::string& program);

/// The flag that sets a TrainOptions field ("model.d_ff" -> "--ff"): validate()'s names on the command line.
std::string flag_for(std::string_view field);

}  // namespace tapegrad::cli
