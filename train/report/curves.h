#pragma once
// curves.svg: the training curves of a run, drawn from its metrics.csv rows (a standalone SVG, svg.h).
// Written atomically and durably (write_file_atomic); an unwritable path is an IOError naming it.
#include <string>
#include <vector>

#include "train/report/metrics.h"

namespace tapegrad {

/// Two stacked panels sharing the step axis: top, training loss and validation loss against step;
/// bottom, validation accuracy (0-100%) against step; dashed lines mark epoch changes, and a line under
/// the title sums the run up (last step, lr, speed, best validation accuracy). A series is drawn
/// as <polyline class="train-loss" | "valid-loss" | "valid-accuracy"> elements with one point per finite
/// value, in row order, split into several polylines where a value that should be there is NaN or
/// infinite (a training loss at any row; a validation value at a row that validated, i.e. where
/// valid_loss or valid_accuracy is not NaN), so that a diverged stretch shows as a gap.
/// 0 or 1 rows, constant values and NaN/inf values are all drawn without error.
void write_curves_svg(const std::string& path, const std::vector<MetricsRow>& rows, const std::string& title);

}  // namespace tapegrad
