#pragma once
// What a person watching a run sees on the log: a live progress line, redrawn in place when stderr is a
// terminal, and one permanent line per validation (a log file gets only those).
#include <cstdint>
#include <iosfwd>
#include <optional>

#include "train/report/metrics.h"

namespace tapegrad {

class Progress {
 public:
  /// Draws live lines only when stderr is a terminal: in a file or a pipe they would be noise.
  explicit Progress(std::ostream& log);

  /// Redraws the live line after a step, at most ten times a second of `now` (seconds):
  /// "step 120/500  loss 0.4312  val acc 93.25%  812 steps/s  ETA 0:01". accuracy: the last validation's
  /// (none yet: "-"); rate: training steps per second, which also gives the ETA.
  void step(int64_t step, int64_t total_steps, double loss, std::optional<double> accuracy, double rate, double now);

  /// Erases the live line, so that the next message starts on an empty line.
  void clear();

  /// Before a validation expected to take long (expected_seconds >= 2): "step 100/500  validating 2000
  /// examples (about 0:07)", as the live line on a terminal; a log file gets it once, as a line with the hint
  /// that --valid-size (built-in tasks) sets how many examples it has.
  void validating(int64_t step, int64_t total_steps, int64_t examples, double expected_seconds);

  /// A validation's permanent line (the live line erased first):
  /// "step 100/500  epoch 0  lr 5.00e-03  loss 0.5210  val loss 0.4811  val acc 91.80%  790.3 steps/s  0:01".
  void validation(const MetricsRow& row, int64_t total_steps);

  /// A language model's run: validation lines give the loss as perplexity, exp(loss), and as bits per character,
  /// loss / ln 2 / characters_per_token (the validation text's characters per token), instead of the epoch.
  void show_language_model(double characters_per_token) { characters_per_token_ = characters_per_token; }

  /// With --verbose: the threads and the BLAS kernels in use; `threads_option` is TrainOptions::threads
  /// (0 says "every core").
  void compute(int threads_option);

 private:
  std::ostream& log_;
  bool live_;
  double last_draw_ = 0;
  bool said_long_validation_ = false;
  double characters_per_token_ = 0;  // > 0: a language model's run
};

}  // namespace tapegrad
