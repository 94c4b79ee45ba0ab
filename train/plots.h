#pragma once
// Pictures a person looks at: training curves and attention maps, each a standalone SVG 1.1 file
// (no scripts, no external resources, no dependencies) that any browser opens.
// Both writers write atomically and durably (write_file_atomic, atomic_file.h) and throw an IOError
// naming the path when the file cannot be written.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/tensor.h"
#include "train/metrics.h"

namespace tapegrad {

/// Two stacked panels sharing the step axis: top, training loss and validation loss against step;
/// bottom, validation accuracy (0-100%) against step; dashed lines mark epoch changes. A series is drawn
/// as <polyline class="train-loss" | "valid-loss" | "valid-accuracy"> elements with one point per finite
/// value, in row order, split into several polylines where a value that should be there is NaN or
/// infinite (a training loss at any row; a validation value at a row that validated, i.e. where
/// valid_loss or valid_accuracy is not NaN), so that a diverged stretch shows as a gap.
/// 0 or 1 rows, constant values and NaN/inf values are all drawn without error.
void write_curves_svg(const std::string& path, const std::vector<MetricsRow>& rows, const std::string& title);

/// weights[l]: layer l's attention probabilities (H,T,T) or (1,H,T,T), float32 or float64, with
/// T = tokens.size() (else a ShapeError naming the shapes). Draws one heatmap panel per (layer, head),
/// layers as rows and heads as columns; in a panel, row q / column k is query token q / key token k,
/// coloured from white (0) to dark blue (1), plus a colour bar. Each panel's cells are the only <rect>s
/// of one <g class="cells"> group. Tokens are XML-escaped and long ones truncated in the labels.
void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<Tensor>& weights, const std::string& title);

// ---- small helpers the writers are built from (public so that tests can pin them down) ----
namespace svg {

/// An axis range widened to multiples of a 1/2/5 x 10^k step, with about `target` intervals.
struct NiceAxis {
  double lo = 0;
  double hi = 1;
  double step = 0.2;
  /// The tick values lo, lo + step, ..., hi.
  std::vector<double> ticks() const;
};

/// The nice axis covering [lo, hi] with a step of at least `min_step` (1 for integer data such as
/// steps); a degenerate range (lo == hi) is padded around its value and a non-finite one becomes [0, 1],
/// so the result always has hi > lo and step > 0.
NiceAxis nice_axis(double lo, double hi, int target, double min_step = 0);

/// `text` with & < > " ' replaced by XML entities, control characters by '?' and invalid UTF-8 bytes by
/// U+FFFD, so that it is safe inside an element or an attribute value.
std::string xml_escape(std::string_view text);

/// `text` cut to at most `max_chars` code points, the last one replaced by "…" when it was cut.
std::string truncate_label(std::string_view text, size_t max_chars);

}  // namespace svg

}  // namespace tapegrad
