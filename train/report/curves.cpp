#include "train/report/curves.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "train/io/atomic_file.h"
#include "train/report/svg.h"

namespace tapegrad {

namespace {

using svg::Box;
using svg::line;
using svg::NiceAxis;
using svg::num;
using svg::num_general;
using svg::Scale;
using svg::text;
using svg::text_width;
using svg::tick_label;

/// A step tick label, shortened with k or M once the numbers get long: "250k", "1.2M".
std::string step_label(double v, const NiceAxis& axis) {
  const double top = std::max(std::fabs(axis.lo), std::fabs(axis.hi));
  if (v != 0 && top >= 1e6 && axis.step >= 1e5) return num(v / 1e6, 1) + "M";
  if (v != 0 && top >= 1e4 && axis.step >= 1e3) return num(v / 1e3, 0) + "k";
  return tick_label(v, axis);
}

/// A data point: (step, value).
struct Point {
  double x, y;
};

// Colours (Tableau's): training blue against validation orange, the pair that colour-blind readers
// also tell apart; accuracy, alone in its panel, green.
constexpr const char* kTrainColour = "#1f77b4";
constexpr const char* kValidColour = "#ff7f0e";
constexpr const char* kAccuracyColour = "#2ca02c";
constexpr const char* kGridColour = "#e6e6e6";
constexpr const char* kAxisColour = "#666666";
constexpr const char* kLabelColour = "#333333";

/// Grid lines at every tick, the panel's frame, y tick labels with the rotated y title, and step tick
/// labels under the panel when `x_labels`.
void draw_panel_axes(std::string& out, const Box& box, const NiceAxis& xa, const NiceAxis& ya, const Scale& sx,
                     const Scale& sy, std::string_view y_title, bool x_labels) {
  const std::string grid = std::string("stroke=\"") + kGridColour + "\" stroke-width=\"1\"";
  for (double v : xa.ticks()) {
    const double x = sx(v);
    line(out, x, box.top, x, box.bottom, grid);
    if (x_labels) {
      line(out, x, box.bottom, x, box.bottom + 4, std::string("stroke=\"") + kAxisColour + "\"");
      text(out, x, box.bottom + 17, step_label(v, xa),
           std::string("font-size=\"11\" text-anchor=\"middle\" fill=\"") + kLabelColour + "\"");
    }
  }
  for (double v : ya.ticks()) {
    const double y = sy(v);
    line(out, box.left, y, box.right, y, grid);
    line(out, box.left - 4, y, box.left, y, std::string("stroke=\"") + kAxisColour + "\"");
    text(out, box.left - 7, y + 4, tick_label(v, ya),
         std::string("font-size=\"11\" text-anchor=\"end\" fill=\"") + kLabelColour + "\"");
  }
  out += "<rect x=\"" + num(box.left) + "\" y=\"" + num(box.top) + "\" width=\"" + num(box.right - box.left) +
         "\" height=\"" + num(box.bottom - box.top) + "\" fill=\"none\" stroke=\"" + kAxisColour + "\"/>\n";
  const double cy = (box.top + box.bottom) / 2;
  out += "<text transform=\"translate(" + num(box.left - 52) + "," + num(cy) +
         ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" fill=\"" + kLabelColour + "\">" +
         svg::xml_escape(y_title) + "</text>\n";
}

/// A series as runs of consecutive finite points: a non-finite value where one was expected ends a
/// run, so a diverged stretch shows as a gap instead of a straight line drawn across it.
struct Series {
  std::vector<std::vector<Point>> runs;
  size_t points = 0;
  size_t skipped = 0;
  bool broken = true;  // the next finite value starts a new run

  /// Adds the value at step x: a finite one extends the current run, a non-finite one ends it.
  void add(double x, double v) {
    if (!std::isfinite(v)) {
      ++skipped;
      broken = true;
      return;
    }
    if (broken) runs.emplace_back();
    runs.back().push_back({x, v});
    ++points;
    broken = false;
  }
};

/// Each run of a series as a <polyline class="css_class"> (one point per value), plus circle markers
/// on every point when `markers` (sparse series) and otherwise on lone points a line cannot show.
void draw_series(std::string& out, const Series& series, const Scale& sx, const Scale& sy, std::string_view css_class,
                 const char* colour, bool markers) {
  for (const std::vector<Point>& run : series.runs) {
    out += "<polyline class=\"" + std::string(css_class) + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"1.6\" stroke-linejoin=\"round\" points=\"";
    for (size_t i = 0; i < run.size(); ++i) {
      if (i) out += ' ';
      out += num(sx(run[i].x), 1) + "," + num(sy(run[i].y), 1);
    }
    out += "\"/>\n";
    if (!markers && run.size() > 1) continue;
    out += "<g fill=\"" + std::string(colour) + "\">\n";
    for (const Point& p : run)
      out += "<circle cx=\"" + num(sx(p.x), 1) + "\" cy=\"" + num(sy(p.y), 1) + "\" r=\"2.6\"/>\n";
    out += "</g>\n";
  }
}

/// A centred grey note inside a panel that has nothing to draw.
void draw_empty_note(std::string& out, const Box& box, std::string_view note) {
  text(out, (box.left + box.right) / 2, (box.top + box.bottom) / 2 + 4, note,
       "font-size=\"13\" text-anchor=\"middle\" fill=\"#999999\" font-style=\"italic\"");
}

/// A one-line summary of the run for under the title: where it ended and the best validation accuracy.
std::string run_summary(const std::vector<MetricsRow>& rows) {
  if (rows.empty()) return "no rows";
  const MetricsRow& last = rows.back();
  std::string s = "step " + std::to_string(last.step) + ", epoch " + std::to_string(last.epoch);
  if (std::isfinite(last.lr)) s += "  \u00b7  lr " + num_general(last.lr, 3);
  if (std::isfinite(last.elapsed_seconds)) s += "  \u00b7  " + num(last.elapsed_seconds, 1) + " s";
  if (std::isfinite(last.steps_per_second) && last.steps_per_second > 0)
    s += " (" + num(last.steps_per_second, 1) + " steps/s)";
  const MetricsRow* best = nullptr;
  for (const MetricsRow& r : rows)
    if (std::isfinite(r.valid_accuracy) && (!best || r.valid_accuracy > best->valid_accuracy)) best = &r;
  if (best)
    s += "  \u00b7  best valid accuracy " + num(100 * best->valid_accuracy, 1) + "% at step " +
         std::to_string(best->step);
  return s;
}

/// Dashed vertical lines where the epoch changes, in both panels, labelled in the top one where there
/// is room; left out entirely when epochs are so short that the lines would hide the curves.
void draw_epoch_marks(std::string& out, const std::vector<MetricsRow>& rows, const Scale& sx, const Box& top,
                      const Box& bottom) {
  std::vector<size_t> changes;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].epoch != rows[i - 1].epoch) changes.push_back(i);
  if (changes.empty() || changes.size() > 40) return;
  double last_label = -1e9;
  for (size_t i : changes) {
    const double x = sx(static_cast<double>(rows[i].step));
    for (const Box* box : {&top, &bottom})
      line(out, x, box->top, x, box->bottom, "stroke=\"#b0b0b0\" stroke-dasharray=\"4,3\"");
    const std::string label = "epoch " + std::to_string(rows[i].epoch);
    if (x - last_label >= text_width(label, 10) + 8 && x + 3 + text_width(label, 10) <= top.right) {
      text(out, x + 3, top.top + 12, label, "font-size=\"10\" fill=\"#888888\"");
      last_label = x;
    }
  }
}

/// A legend entry: a short line in `colour` (with a dot when `marker`) followed by `label`; returns the
/// x where the next entry starts.
double draw_legend_entry(std::string& out, double x, double y, const char* colour, bool marker,
                         std::string_view label) {
  line(out, x, y, x + 22, y, std::string("stroke=\"") + colour + "\" stroke-width=\"2\"");
  if (marker) out += "<circle cx=\"" + num(x + 11) + "\" cy=\"" + num(y) + "\" r=\"2.6\" fill=\"" + colour + "\"/>\n";
  text(out, x + 28, y + 4, label, std::string("font-size=\"12\" fill=\"") + kLabelColour + "\"");
  return x + 28 + text_width(label, 12) + 22;
}

// Layout (pixels): title, summary and legend on top; the loss panel; the accuracy panel; the step axis.
constexpr double kWidth = 860, kHeight = 636, kLeft = 84, kRight = kWidth - 36;

/// The loss panel's range over the finite points of both series, or [0, 1] when there are none.
std::pair<double, double> loss_range(const Series& train_loss, const Series& valid_loss) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series* series : {&train_loss, &valid_loss})
    for (const auto& run : series->runs)
      for (const Point& p : run) {
        lo = std::min(lo, p.y);
        hi = std::max(hi, p.y);
      }
  if (lo > hi) return {0, 1};
  if (lo < hi) {
    // Headroom so no curve runs along the frame; the axis starts at 0 when that costs less than half
    // the panel, because the eye reads a loss as "how far down".
    const double pad = 0.04 * (hi - lo);
    lo = lo >= 0 && lo < 0.5 * hi ? 0 : lo - pad;
    hi += pad;
  }
  return {lo, hi};
}

/// The title and the summary, cut to the width they have, the legend, and a warning of left-out values.
void draw_heading(std::string& out, const std::string& title, const std::vector<MetricsRow>& rows, size_t skipped) {
  const auto title_chars = static_cast<size_t>((kWidth - 40) / (0.62 * 18));
  text(out, kWidth / 2, 28, svg::truncate_label(title, title_chars),
       "font-size=\"18\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#111111\"");
  const auto summary_chars = static_cast<size_t>((kWidth - 20) / (0.62 * 12));
  text(out, kWidth / 2, 48, svg::truncate_label(run_summary(rows), summary_chars),
       "font-size=\"12\" text-anchor=\"middle\" fill=\"#666666\"");
  double x = kLeft;
  x = draw_legend_entry(out, x, 70, kTrainColour, false, "train loss");
  x = draw_legend_entry(out, x, 70, kValidColour, true, "valid loss");
  draw_legend_entry(out, x, 70, kAccuracyColour, true, "valid accuracy");
  // Left-out values are worth a warning: a diverged run is exactly when someone opens this picture.
  if (skipped)
    text(out, kRight, 74, std::to_string(skipped) + " non-finite value" + (skipped == 1 ? "" : "s") + " (NaN/inf) left out",
         "font-size=\"12\" text-anchor=\"end\" fill=\"#b22222\"");
}

}  // namespace

void write_curves_svg(const std::string& path, const std::vector<MetricsRow>& rows, const std::string& title) {
  const Box top{kLeft, 88, kRight, 348};
  const Box bottom{kLeft, 376, kRight, 570};

  // The series, in row order. Training loss is expected at every row, validation values at rows that
  // validated (either one not NaN); accuracy is a fraction, drawn in percent.
  Series train_loss, valid_loss, accuracy;
  double step_lo = 0, step_hi = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const MetricsRow& r = rows[i];
    const auto x = static_cast<double>(r.step);
    step_lo = i ? std::min(step_lo, x) : x;
    step_hi = i ? std::max(step_hi, x) : x;
    train_loss.add(x, r.train_loss);
    if (std::isnan(r.valid_loss) && std::isnan(r.valid_accuracy)) continue;
    valid_loss.add(x, r.valid_loss);
    accuracy.add(x,
                 std::isfinite(r.valid_accuracy) ? std::clamp(100 * r.valid_accuracy, 0.0, 100.0) : r.valid_accuracy);
  }
  const auto [loss_lo, loss_hi] = loss_range(train_loss, valid_loss);
  const bool have_loss = train_loss.points + valid_loss.points > 0;

  // The step axis starts at a round number but ends at the last step, so the curves reach the right
  // edge; its ticks are the round ones up to there. (One row: the padded round range.)
  NiceAxis x_axis = rows.empty() ? NiceAxis{0, 1, 1} : svg::nice_axis(step_lo, step_hi, 7, 1);
  const double x_end = step_hi > step_lo ? step_hi : x_axis.hi;
  x_axis.hi = x_axis.lo + std::floor((x_end - x_axis.lo) / x_axis.step + 1e-9) * x_axis.step;
  const NiceAxis loss_axis = svg::nice_axis(loss_lo, loss_hi, 5);
  const NiceAxis accuracy_axis{0, 100, 20};
  const Scale sx{x_axis.lo, x_end, top.left, top.right};
  const Scale sy_loss{loss_axis.lo, loss_axis.hi, top.bottom, top.top};
  const Scale sy_accuracy{accuracy_axis.lo, accuracy_axis.hi, bottom.bottom, bottom.top};

  std::string out = svg::header(kWidth, kHeight);
  draw_heading(out, title, rows, train_loss.skipped + valid_loss.skipped + accuracy.skipped);
  out += "<g class=\"loss-panel\">\n";
  draw_panel_axes(out, top, x_axis, loss_axis, sx, sy_loss, "loss", false);
  if (!have_loss) draw_empty_note(out, top, "no finite loss values");
  out += "</g>\n<g class=\"accuracy-panel\">\n";
  draw_panel_axes(out, bottom, x_axis, accuracy_axis, sx, sy_accuracy, "valid accuracy (%)", true);
  if (accuracy.points == 0) draw_empty_note(out, bottom, "no validation accuracy");
  out += "</g>\n";
  text(out, (kLeft + kRight) / 2, kHeight - 14, "step",
       std::string("font-size=\"12\" text-anchor=\"middle\" fill=\"") + kLabelColour + "\"");

  out += "<g class=\"epochs\">\n";
  draw_epoch_marks(out, rows, sx, top, bottom);
  out += "</g>\n<g class=\"series\">\n";
  draw_series(out, train_loss, sx, sy_loss, "train-loss", kTrainColour, false);
  draw_series(out, valid_loss, sx, sy_loss, "valid-loss", kValidColour, valid_loss.points <= 200);
  draw_series(out, accuracy, sx, sy_accuracy, "valid-accuracy", kAccuracyColour, accuracy.points <= 200);
  out += "</g>\n</svg>\n";
  write_file_atomic(path, out);
}

}  // namespace tapegrad
