#pragma once
// A training run's state as a few parts, each with one owner, and trainer.json: what of it a checkpoint saves
// beside the weights and the optimizer (step, schedule, every RNG, the best validation, time spent, the
// data's fingerprints), and how --resume restores it so that the run continues bit-identically.
//   options, data      set up once (trainer.cpp, resume.cpp), read by everyone after
//   model              the TrainableModel; the step and validation run it
//   optimizer+schedule the update, made by the set-up and used by the loop only
//   progress           the counters, best validation, rows and timing: the loop's, restored by resume
//   ranks              the processes the run spans and what they share (run_on_ranks.h)
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/parallel/communicator.h"
#include "train/parallel/data_parallel.h"
#include "train/report/metrics.h"
#include "train/train_options.h"
#include "train/trainable_model.h"
#include "train/training_stream.h"

namespace tapegrad {

/// Where a run's wall-clock time went (see TrainSummary).
struct RunTiming {
  double train_seconds = 0, validation_seconds = 0, checkpoint_seconds = 0;
};

/// Where a run stands: what the loop advances and trainer.json keeps beside the RNGs and the schedule.
struct RunProgress {
  int64_t step = 0, total_steps = 0;
  int64_t truncated = 0;        // training sequences cut to the context length
  int64_t published_step = -1;  // the step of the checkpoint `latest` points at; -1: none yet
  double best_accuracy = -1, best_loss = 0;
  int64_t best_step = 0;
  double elapsed_before = 0;  // wall-clock seconds of earlier sessions
  double window_loss = 0;     // training loss summed since the last row
  int64_t window_steps = 0;
  RunTiming timing;  // all sessions, up to the last checkpoint
  std::vector<MetricsRow> metrics;
};

/// The processes a run spans (data_parallel.h): one, single_process(), or the ranks of mpirun and their
/// hosts, the averager of their gradients, the dropout streams of ranks 1.. as the last checkpoint gathered
/// them (trainer.json), and a stop that every rank agreed on (the signal; 0: none).
struct RunRanks {
  Communicator* comm = &single_process();
  int hosts = 1;
  std::unique_ptr<GradientAverager> averager;  // null on one process
  std::vector<nlohmann::json> rank_dropout;
  int agreed_stop = 0;

  bool several() const { return comm->size() > 1; }
};

struct Run {
  TrainOptions options;
  TrainingData data;
  std::unique_ptr<TrainableModel> model;
  std::shared_ptr<Generator> dropout_rng;
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::LrSchedule schedule;
  RunProgress progress;
  RunRanks ranks;

  /// trainer.json; `elapsed` is the run's wall-clock time so far (all sessions).
  nlohmann::json trainer_state(double elapsed) const;
};

inline constexpr const char* kTrainerFormat = "tapegrad-trainer-1";

/// A run directory's trainer.json, read as hostile (a size limit, strict JSON: no key twice, bounded
/// nesting, its 'format' this version's); IOError naming the file. Its "options" are read by
/// train_options_from_json.
nlohmann::json read_trainer_state(const std::string& path);

/// Sets run's progress, schedule and RNG states to those of trainer.json `state`, and its metrics to the rows
/// of dir/metrics.csv up to the saved step (a kill between writing metrics.csv and publishing leaves later rows,
/// which the continued run writes again). The run must already hold its data, model and optimizer.
/// `total_steps` > 0 is a new total, stretching a decaying schedule over it; 0 keeps the saved one. IOError
/// naming the key when a field is missing, of another type, unknown, or outside the range a run writes.
void restore_run_state(Run& run, const nlohmann::json& state, const std::string& dir, int64_t total_steps);

}  // namespace tapegrad
