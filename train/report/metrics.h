#pragma once
// metrics.csv: the training log, and the progress a person watches while training runs.
//
// One row every --log-every steps and one at every validation (a step that is both has one row):
//   step, epoch, lr          after that step
//   train_loss               the mean training loss over the steps since the previous row
//   valid_loss,              on validation rows; empty on training-only rows (NaN in MetricsRow)
//   valid_accuracy
//   steps_per_second         training steps per second since the previous row, validation and
//                            checkpoint time left out
//   elapsed_seconds          wall-clock seconds since the run started (every session of a resumed run)
// The file is rewritten at each validation, before its checkpoint is published, so it holds the rows up
// to the last validation; --resume keeps the rows up to its checkpoint's step and writes the rest again.
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad {

/// One row of metrics.csv (the columns above). A NaN valid_* means "no validation at this row" (an empty
/// cell in the file); the curves (curves.h) leave any NaN or infinite value out of the picture.
struct MetricsRow {
  int64_t step = 0;
  int64_t epoch = 0;
  double lr = 0;
  double train_loss = 0;
  double valid_loss = 0;
  double valid_accuracy = 0;  // fraction correct, in [0, 1]; drawn as a percentage
  double steps_per_second = 0;
  double elapsed_seconds = 0;
};

/// The header line of metrics.csv.
inline constexpr const char* kMetricsHeader =
    "step,epoch,lr,train_loss,valid_loss,valid_accuracy,steps_per_second,elapsed_seconds";

/// Writes every row (atomically); numbers keep full precision so a resumed run can be compared exactly.
void write_metrics_csv(const std::string& path, const std::vector<MetricsRow>& rows);
/// Reads metrics.csv back (IOError naming file and line when malformed).
std::vector<MetricsRow> read_metrics_csv(const std::string& path);

/// "1:05" / "1:02:03" for a duration in seconds.
std::string format_duration(double seconds);

}  // namespace tapegrad
