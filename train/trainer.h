#pragma once
// The training behind `tapegrad train`: data, model, optimizer, schedule, periodic validation, metrics.csv +
// curves.svg, checkpoints (latest and best), early stop and exact resume. The files of train's root:
//   trainer.cpp, resume.cpp   a new run set up, a saved one restored (run_setup: what both share)
//   training_loop             the loop: steps, rows, validations, checkpoints, stops
//   training_step             one step's forward and backward, and a validation, on one process or on ranks
//   trainable_model           the model as the loop sees it (classifier_model: the sequence classifier)
//   run_state                 the run's parts and trainer.json; run_on_ranks: what only ranks need
//   publish_run               each checkpoint's files;  training_stream: the data;  training_memory
// A step's walk: TrainingLoop::step (training_loop.cpp) -> forward_backward (training_step.cpp) ->
// ClassifierModel::loss (classifier_model.cpp: make_batch, the classifier, cross_entropy) -> backward ->
// clip, the schedule's lr, Optimizer::step, back in TrainingLoop::step.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/random.h"
#include "nn/classifier.h"
#include "train/parallel/communicator.h"
#include "train/parallel/data_parallel.h"
#include "train/train_options.h"

namespace tapegrad {

/// What a finished run reports (`train --json`).
struct TrainSummary {
  int64_t steps = 0;
  // Wall-clock seconds of the whole run (every session of a resumed one), split into training steps,
  // validation, and writing checkpoints with metrics.csv and curves.svg; the three add up to `seconds`
  // but for loop overhead and the moments a killed session lost after its last checkpoint.
  double seconds = 0;
  double train_seconds = 0, validation_seconds = 0, checkpoint_seconds = 0;
  double train_steps_per_second = 0;  // steps / train_seconds: throughput of the training steps alone
  double final_accuracy = 0, final_loss = 0;
  double best_accuracy = 0, best_loss = 0;
  int64_t best_step = 0;
  int64_t parameters = 0;
  int64_t truncated = 0;  // training sequences cut to the context length
  bool reached_target = false;
  std::string out;
  std::string sample_text;  // a validation text, to suggest a `predict` (or a language model's `generate`) command with
  // A language model's run: the last validation loss in bits per character of the validation text.
  bool language_model = false;
  double final_bits_per_character = 0;
  // Data parallelism (docs/distributed.md): the ranks, the examples of one step over all of them, and the
  // seconds per step that rank 0 waited after its backward: for the other ranks to finish theirs, then for
  // the gradient sums (reported when ranks > 1).
  int ranks = 1;
  int64_t global_batch = 0;
  double rank_wait_seconds_per_step = 0, allreduce_seconds_per_step = 0;
};
nlohmann::json to_json(const TrainSummary& summary);

/// Makes the model a run trains, for a program that builds its own in C++. `options` are the run's model
/// options with vocab_size, num_classes and context_length filled in from the data (and, on resume, the
/// saved model's options); `init` draws the initial weights; `dropout_rng` is the run's dropout stream,
/// whose state every checkpoint saves. The model may differ from `options` (another norm_first, a wider
/// d_ff) but must agree with the data on vocab_size, num_classes and context_length. Its own options()
/// are what config.json and trainer.json record, so resume, eval and predict rebuild what it built.
using ModelBuilder = std::function<std::unique_ptr<nn::SequenceClassifier>(
    const nn::ClassifierOptions& options, Generator& init, std::shared_ptr<Generator> dropout_rng)>;

/// The builder of `tapegrad train`: nn::SequenceClassifier(options, init, dropout_rng), the options as given.
std::unique_ptr<nn::SequenceClassifier> build_classifier(const nn::ClassifierOptions& options, Generator& init,
                                                         std::shared_ptr<Generator> dropout_rng);

/// The processes a run spans: one, or the ranks of `mpirun` (train/parallel/communicator.h, docs/distributed.md).
/// With more than one rank, every rank calls train() or resume() with the same arguments: each takes its
/// share of every batch (options.batch_size examples: the step's batch is batch_size x ranks), the
/// gradients are averaged over the ranks, and only rank 0 writes the log, the run directory and its
/// checkpoints. A set-up that fails on any rank, or differs between ranks, is an AgreedError on every rank.
struct Parallelism {
  Communicator* comm = nullptr;  // nullptr: this process alone
  DataParallelOptions data_parallel;
};

/// Trains from scratch (or from options.init) into options.out; progress goes to log. The model is the one
/// `build` makes once the data is read (with --init the checkpoint's weights are then loaded into it); a built
/// model that disagrees with the data is a ValueError naming the option and both numbers.
/// While it trains (and so resume()): SIGINT or SIGTERM saves the current step's checkpoint and throws
/// Interrupted (train/io/interrupt.h); another trainer holding the run directory's lock is a ValueError
/// (train/io/run_lock.h); a non-finite loss or weight stops it before anything non-finite is published.
TrainSummary train(const TrainOptions& options, std::ostream& log, const ModelBuilder& build = build_classifier,
                   const Parallelism& parallelism = {});

/// What a resumed run may change; everything else is the saved run's.
struct ResumeOptions {
  int64_t steps = 0;  // a new total number of steps; 0: the saved total
  int threads = -1;   // -1: the saved count (a different count changes results only within rounding)
  bool verbose = false;
  bool detect_anomaly = false;
  // The same data from another path: needed when the run read its data from a pipe. Refused unless the
  // examples are the ones the run started with (trainer.json keeps their fingerprint).
  std::string data = {}, valid = {};
  std::string activation_checkpointing = "auto";  // memory only: a resumed run may choose anew
};

/// Continues the run in `dir` exactly where its latest checkpoint stopped. Every RNG, the optimizer state,
/// the schedule and metrics.csv continue, so the result is bit-identical to a run that was never
/// interrupted (on the same number of threads). The model is rebuilt through `build` (given the saved model
/// options) before the saved weights are loaded into it: a run trained with a builder resumes with the same
/// builder. Over the ranks of `parallelism`, rank 0's checkpoint continues on any number of ranks (the data
/// stream goes on from the same example; each step's batch is batch_size x the ranks now).
TrainSummary resume(const std::string& dir, const ResumeOptions& options, std::ostream& log,
                    const ModelBuilder& build = build_classifier, const Parallelism& parallelism = {});

}  // namespace tapegrad
