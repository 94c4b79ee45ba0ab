#include "train/plots.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "autograd/error.h"
#include "train/atomic_file.h"
#include "train/text_lines.h"

namespace tapegrad {

// =====================================================================================================
// Helpers: numbers, text, files
// =====================================================================================================
namespace svg {

std::vector<double> NiceAxis::ticks() const {
  std::vector<double> values;
  const int64_t intervals = std::llround((hi - lo) / step);
  for (int64_t i = 0; i <= intervals && i <= 1000; ++i) {
    const double v = lo + static_cast<double>(i) * step;
    values.push_back(std::fabs(v) < 1e-9 * step ? 0.0 : v);  // no "-0" or 1e-17 from rounding
  }
  return values;
}

namespace {

/// The smallest 1/2/5 x 10^k that is about `raw` (thresholds halfway, geometrically, between them).
double nice_step(double raw) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;  // in [1, 10)
  const double mult = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return mult * magnitude;
}

}  // namespace

NiceAxis nice_axis(double lo, double hi, int target, double min_step) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (lo > hi) std::swap(lo, hi);
  // A span below a millionth of the values' size is a constant: ticks that fine would print alike.
  const double size = std::max(std::fabs(lo), std::fabs(hi));
  if (hi - lo <= 1e-6 * size || hi == lo) {
    const double pad = size > 0 ? 0.1 * size : 1.0;
    lo -= pad;
    hi += pad;
  }
  if (!std::isfinite(hi - lo)) return {};  // beyond +-DBL_MAX / 2: nothing sensible to draw
  NiceAxis axis;
  axis.step = std::max(nice_step((hi - lo) / std::max(target, 1)), min_step);
  axis.lo = std::floor(lo / axis.step) * axis.step;
  axis.hi = std::ceil(hi / axis.step) * axis.step;
  if (axis.hi <= axis.lo) axis.hi = axis.lo + axis.step;
  return axis;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);  // XML forbids most controls
      }
      ++i;
      continue;
    }
    // A multi-byte sequence is copied when valid (no overlong forms, surrogates or > U+10FFFF).
    const size_t length = utf8_sequence_length(text, i);
    if (length > 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the one bad byte, then resynchronise
      ++i;
    }
  }
  return out;
}

std::string truncate_label(std::string_view text, size_t max_chars) {
  // Code points start at every byte that is not a continuation byte (10xxxxxx).
  size_t chars = 0, cut = text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) == 0x80) continue;
    if (chars + 1 == max_chars) cut = i;  // where the ellipsis goes if the text turns out too long
    if (++chars > max_chars) return std::string(text.substr(0, max_chars == 0 ? 0 : cut)) + "\u2026";
  }
  return std::string(text);
}

}  // namespace svg

namespace {

using svg::NiceAxis;

/// `v` in plain decimal with at most `decimals` digits after the point, trailing zeros dropped; the
/// same in every locale (SVG needs '.', not ','). Callers pass finite values; others print as 0.
std::string num(double v, int decimals = 2) {
  if (!std::isfinite(v)) v = 0;
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::fixed, decimals);
  if (ec != std::errc()) return "0";
  std::string s(buffer, end);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

/// `v` with `digits` significant digits, switching to an exponent for very large or small values.
std::string num_general(double v, int digits) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::general, digits);
  return ec == std::errc() ? std::string(buffer, end) : "?";
}

/// A tick label for value `v` on `axis`: as many decimals as the step needs, all ticks alike.
std::string tick_label(double v, const NiceAxis& axis) {
  if (std::max(std::fabs(axis.lo), std::fabs(axis.hi)) >= 1e7 || axis.step < 1e-5) return num_general(v, 4);
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(axis.step) + 1e-9)), 0, 6);
  return num(v, decimals);
}

/// A step tick label, shortened with k or M once the numbers get long: "250k", "1.2M".
std::string step_label(double v, const NiceAxis& axis) {
  const double top = std::max(std::fabs(axis.lo), std::fabs(axis.hi));
  if (v != 0 && top >= 1e6 && axis.step >= 1e5) return num(v / 1e6, 1) + "M";
  if (v != 0 && top >= 1e4 && axis.step >= 1e3) return num(v / 1e3, 0) + "k";
  return tick_label(v, axis);
}

/// Rough width in pixels of `text` in a sans-serif font of `font_size` (0.62 em per code point).
double text_width(std::string_view text, double font_size) {
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return 0.62 * font_size * static_cast<double>(chars);
}

/// Appends <text> at (x, y) holding `content` (escaped here), with extra attributes `attrs`.
void text(std::string& out, double x, double y, std::string_view content, std::string_view attrs = {}) {
  out += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"";
  if (!attrs.empty()) (out += ' ') += attrs;
  out += '>' + svg::xml_escape(content) + "</text>\n";
}

/// Appends a <line> from (x1, y1) to (x2, y2) with attributes `attrs` (stroke etc.).
void line(std::string& out, double x1, double y1, double x2, double y2, std::string_view attrs) {
  out += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\" ";
  (out += attrs) += "/>\n";
}

/// The opening <svg> tag of a standalone document of width x height pixels, and a white background.
std::string svg_header(double width, double height) {
  const std::string w = num(std::ceil(width), 0), h = num(std::ceil(height), 0);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n" +
         "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
}

/// A linear map from data [d0, d1] (d1 != d0) to pixels [p0, p1], clamped to the pixel range so that
/// an out-of-axis value pins to the panel's edge instead of escaping it.
struct Scale {
  double d0, d1, p0, p1;
  double operator()(double v) const {
    const double p = p0 + (v - d0) / (d1 - d0) * (p1 - p0);
    return std::clamp(p, std::min(p0, p1), std::max(p0, p1));
  }
};

// =====================================================================================================
// Training curves
// =====================================================================================================

/// A plot area in pixels.
struct Box {
  double left, top, right, bottom;
};

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

}  // namespace

void write_curves_svg(const std::string& path, const std::vector<MetricsRow>& rows, const std::string& title) {
  // Layout (pixels): title, summary and legend on top; the loss panel; the accuracy panel; the step axis.
  constexpr double kWidth = 860, kHeight = 636, kLeft = 84, kRight = kWidth - 36;
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
  double loss_lo = INFINITY, loss_hi = -INFINITY;
  for (const Series* series : {&train_loss, &valid_loss})
    for (const auto& run : series->runs)
      for (const Point& p : run) {
        loss_lo = std::min(loss_lo, p.y);
        loss_hi = std::max(loss_hi, p.y);
      }
  const bool have_loss = loss_lo <= loss_hi;
  if (!have_loss) {
    loss_lo = 0;
    loss_hi = 1;
  } else if (loss_lo < loss_hi) {
    // Headroom so no curve runs along the frame; the axis starts at 0 when that costs less than half
    // the panel, because the eye reads a loss as "how far down".
    const double pad = 0.04 * (loss_hi - loss_lo);
    loss_lo = loss_lo >= 0 && loss_lo < 0.5 * loss_hi ? 0 : loss_lo - pad;
    loss_hi += pad;
  }

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

  std::string out = svg_header(kWidth, kHeight);
  // The title, cut to the width it has.
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
  if (const size_t skipped = train_loss.skipped + valid_loss.skipped + accuracy.skipped)
    text(out, kRight, 74,
         std::to_string(skipped) + " non-finite value" + (skipped == 1 ? "" : "s") + " (NaN/inf) left out",
         "font-size=\"12\" text-anchor=\"end\" fill=\"#b22222\"");

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

// =====================================================================================================
// Attention maps
// =====================================================================================================
namespace {

/// The sequential scale from white (0) to dark blue (1): ColorBrewer "Blues" with a pure white end.
constexpr std::array<std::array<int, 3>, 9> kBlues = {{{255, 255, 255},
                                                       {222, 235, 247},
                                                       {198, 219, 239},
                                                       {158, 202, 225},
                                                       {107, 174, 214},
                                                       {66, 146, 198},
                                                       {33, 113, 181},
                                                       {8, 81, 156},
                                                       {8, 48, 107}}};

/// "#rrggbb" for an RGB triple.
std::string hex_colour(int r, int g, int b) {
  constexpr const char* digits = "0123456789abcdef";
  std::string s = "#";
  for (int c : {r, g, b}) {
    s += digits[(c >> 4) & 15];
    s += digits[c & 15];
  }
  return s;
}

/// The colour of a weight, interpolated linearly between the scale's stops (clamped to [0, 1]); NaN is
/// a light red that no weight can have, so a broken softmax stands out.
std::string weight_colour(double w) {
  if (std::isnan(w)) return "#f4a3a3";
  const double t = std::clamp(w, 0.0, 1.0) * (kBlues.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), kBlues.size() - 2);
  const double f = t - static_cast<double>(i);
  int rgb[3];
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(kBlues[i][c] + f * (kBlues[i + 1][c] - kBlues[i][c])));
  return hex_colour(rgb[0], rgb[1], rgb[2]);
}

/// Checks one layer's weights against the token count and returns its number of heads.
// weights: (H,T,T) or (1,H,T,T)
int64_t attention_heads(const Tensor& weights, size_t layer, int64_t tokens) {
  if (!weights.defined()) throw ValueError(cat("write_attention_svg: weights[", layer, "] is undefined"));
  if (!is_floating(weights.dtype()))
    throw DTypeError(cat("write_attention_svg: weights[", layer, "] is ", dtype_name(weights.dtype()),
                         "; expected float32 or float64"));
  const Shape& s = weights.shape();
  const bool ok =
      (s.rank() == 3 || (s.rank() == 4 && s[0] == 1)) && s[s.rank() - 1] == tokens && s[s.rank() - 2] == tokens;
  if (!ok)
    throw ShapeError(cat("write_attention_svg: weights[", layer, "] has shape ", s, " but there are ", tokens,
                         " tokens; expected (H,", tokens, ",", tokens, ") or (1,H,", tokens, ",", tokens, ")"));
  return s[s.rank() - 3];
}

/// A vertical colour bar at (x, y), `height` pixels tall, 0 at the bottom and 1 at the top, with ticks.
void draw_colour_bar(std::string& out, double x, double y, double height) {
  out += "<defs><linearGradient id=\"blues\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (size_t i = 0; i < kBlues.size(); ++i)
    out += "<stop offset=\"" + num(static_cast<double>(i) / (kBlues.size() - 1), 3) + "\" stop-color=\"" +
           hex_colour(kBlues[i][0], kBlues[i][1], kBlues[i][2]) + "\"/>\n";
  out += "</linearGradient></defs>\n<g class=\"colour-bar\">\n";
  text(out, x, y - 8, "weight", "font-size=\"11\" fill=\"#333333\"");
  out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"14\" height=\"" + num(height) +
         "\" fill=\"url(#blues)\" stroke=\"#999999\"/>\n";
  for (double v : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const double ty = y + height * (1 - v);
    line(out, x + 14, ty, x + 18, ty, "stroke=\"#666666\"");
    text(out, x + 21, ty + 4, num(v, 2), "font-size=\"10\" fill=\"#333333\"");
  }
  out += "</g>\n";
}

}  // namespace

void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<Tensor>& weights, const std::string& title) {
  const auto T = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> heads;
  for (size_t l = 0; l < weights.size(); ++l) heads.push_back(attention_heads(weights[l], l, T));
  const int64_t columns = heads.empty() ? 0 : *std::max_element(heads.begin(), heads.end());

  // Cell and font sizes: a panel is about 360 px wide, cells 3..24 px; labels that would overlap at
  // this font size are thinned to every `stride`-th token.
  const double cell = std::clamp(std::floor(360.0 / static_cast<double>(std::max<int64_t>(T, 1))), 3.0, 24.0);
  const double font = std::clamp(cell - 1, 7.0, 11.0);
  const auto stride = static_cast<int64_t>(std::max(1.0, std::ceil((font + 1) / cell)));
  constexpr size_t kLabelChars = 14;
  std::vector<std::string> labels;
  double label_width = 0;
  for (const std::string& t : tokens) {
    labels.push_back(svg::truncate_label(t, kLabelChars));
    label_width = std::max(label_width, text_width(labels.back(), font));
  }
  label_width = std::ceil(label_width) + 8;

  // Panel geometry: the y labels, then the grid; above it the panel title, below it the rotated x labels.
  constexpr double kMargin = 16, kGap = 18, kPanelTitle = 12, kTop = 64;
  const double grid = cell * static_cast<double>(T);
  const double panel_title_width = text_width("layer 00, head 00", kPanelTitle);
  const double column_width = label_width + std::max(grid, panel_title_width) + kGap;
  const double row_height = 20 + grid + 4 + label_width + kGap;
  const double bar_height = std::clamp(grid, 120.0, 300.0);
  const double content_width = static_cast<double>(columns) * column_width + 8 + 14 + 40;
  const double width = std::max(content_width, text_width(title, 18)) + 2 * kMargin;
  const double left = (width - content_width) / 2;  // panels centred under a title wider than them
  const double bar_x = left + static_cast<double>(columns) * column_width + 8;
  const double height =
      std::max(kTop + static_cast<double>(weights.size()) * row_height, kTop + 20 + bar_height + 20) + kMargin;

  std::string out = svg_header(width, height);
  text(out, width / 2, 28, title, "font-size=\"18\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#111111\"");
  text(out, width / 2, 48, "rows: query tokens (who attends)  \u00b7  columns: key tokens (attended to)",
       "font-size=\"12\" text-anchor=\"middle\" fill=\"#666666\"");
  if (weights.empty())
    text(out, width / 2, kTop + 40, "no attention weights", "font-size=\"13\" text-anchor=\"middle\" fill=\"#999999\"");

  const bool tooltips = T <= 48;  // hover text per cell: cheap for short sequences, bulky for long ones
  const std::string label_attrs = "font-size=\"" + num(font) + "\" fill=\"#333333\"";
  for (size_t l = 0; l < weights.size(); ++l) {
    const std::vector<double> w = weights[l].to_vector();
    for (int64_t h = 0; h < heads[l]; ++h) {
      const double gx = left + static_cast<double>(h) * column_width + label_width;
      const double gy = kTop + static_cast<double>(l) * row_height + 20;
      out += "<g class=\"panel\">\n";
      const std::string panel_title = "layer " + std::to_string(l) + ", head " + std::to_string(h);
      const double title_x = std::max(gx + grid / 2, gx - label_width + text_width(panel_title, kPanelTitle) / 2);
      text(out, title_x, gy - 7, panel_title,
           "font-size=\"12\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"#222222\"");
      // Query labels on the left of each row, key labels under each column reading upwards.
      for (int64_t i = 0; i < T; i += stride) {
        const double c = (static_cast<double>(i) + 0.5) * cell;
        text(out, gx - 4, gy + c, labels[i], label_attrs + " text-anchor=\"end\" dy=\"0.35em\"");
        out += "<text transform=\"translate(" + num(gx + c) + "," + num(gy + grid + 4) + ") rotate(-90)\" " +
               label_attrs + " text-anchor=\"end\" dy=\"0.35em\">" + svg::xml_escape(labels[i]) + "</text>\n";
      }
      out += "<g class=\"cells\" transform=\"translate(" + num(gx) + "," + num(gy) +
             ")\" shape-rendering=\"crispEdges\">\n";
      const std::string size = "\" width=\"" + num(cell) + "\" height=\"" + num(cell) + "\" fill=\"";
      for (int64_t q = 0; q < T; ++q)
        for (int64_t k = 0; k < T; ++k) {
          const double v = w[static_cast<size_t>((h * T + q) * T + k)];
          out += "<rect x=\"" + num(static_cast<double>(k) * cell) + "\" y=\"" + num(static_cast<double>(q) * cell) +
                 size + weight_colour(v) + "\"";
          if (tooltips)
            out += "><title>" + svg::xml_escape(svg::truncate_label(tokens[q], 40)) + " \u2192 " +
                   svg::xml_escape(svg::truncate_label(tokens[k], 40)) + ": " +
                   (std::isfinite(v) ? num(v, 4) : num_general(v, 4)) + "</title></rect>\n";
          else
            out += "/>\n";
        }
      out += "</g>\n";
      out += "<rect x=\"" + num(gx) + "\" y=\"" + num(gy) + "\" width=\"" + num(grid) + "\" height=\"" + num(grid) +
             "\" fill=\"none\" stroke=\"#999999\"/>\n</g>\n";
    }
  }
  if (!weights.empty()) draw_colour_bar(out, bar_x, kTop + 20, bar_height);
  out += "</svg>\n";
  write_file_atomic(path, out);
}

}  // namespace tapegrad
