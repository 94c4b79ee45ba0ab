#pragma once
// metrics.csv: one row per validation (step, epoch, lr, train loss, validation loss and accuracy,
// steps/s, elapsed seconds), and the progress a person watches while training runs.
#include <string>
#include <vector>

#include "train/plots.h"

namespace tapegrad {

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
