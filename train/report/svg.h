#pragma once
// SVG primitives the pictures (curves.h, attention_map.h) are drawn with: a standalone SVG 1.1 document
// (no scripts, no external resources, no dependencies) that any browser opens, numbers printed the same
// in every locale, axes at round values, linear scales, and text made safe for XML.
// The picture is built in a std::string, then written whole (write_file_atomic).
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::svg {

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

/// A linear map from data [d0, d1] (d1 != d0) to pixels [p0, p1], clamped to the pixel range so that
/// an out-of-axis value pins to the panel's edge instead of escaping it.
struct Scale {
  double d0, d1, p0, p1;
  double operator()(double v) const;
};

/// A plot area in pixels.
struct Box {
  double left, top, right, bottom;
};

/// `text` with & < > " ' replaced by XML entities, control characters by '?' and invalid UTF-8 bytes by
/// U+FFFD, so that it is safe inside an element or an attribute value.
std::string xml_escape(std::string_view text);

/// `text` cut to at most `max_chars` code points, the last one replaced by "…" when it was cut.
std::string truncate_label(std::string_view text, size_t max_chars);

/// `v` in plain decimal with at most `decimals` digits after the point, trailing zeros dropped; the
/// same in every locale (SVG needs '.', not ','). Callers pass finite values; others print as 0.
std::string num(double v, int decimals = 2);

/// `v` with `digits` significant digits, switching to an exponent for very large or small values.
std::string num_general(double v, int digits);

/// A tick label for value `v` on `axis`: as many decimals as the step needs, all ticks alike.
std::string tick_label(double v, const NiceAxis& axis);

/// Rough width in pixels of `text` in a sans-serif font of `font_size` (0.62 em per code point).
double text_width(std::string_view text, double font_size);

/// The opening <svg> tag of a standalone document of width x height pixels, and a white background;
/// the document ends with "</svg>\n".
std::string header(double width, double height);

/// Appends <text> at (x, y) holding `content` (escaped here), with extra attributes `attrs`.
void text(std::string& out, double x, double y, std::string_view content, std::string_view attrs = {});

/// Appends a <line> from (x1, y1) to (x2, y2) with attributes `attrs` (stroke etc.).
void line(std::string& out, double x1, double y1, double x2, double y2, std::string_view attrs);

/// An sRGB colour, each channel 0..255.
using Rgb = std::array<int, 3>;

/// "#rrggbb" for `c`.
std::string hex_colour(const Rgb& c);

/// The colour at `t` along a scale of evenly spaced `stops` (t = 0 the first, t = 1 the last; t is
/// clamped to [0, 1]), interpolated linearly per channel between the two stops around it. A heatmap
/// maps its value range onto t. Fewer than two stops is a ValueError.
std::string colour_at(std::span<const Rgb> stops, double t);

/// The legend of a heatmap: a vertical bar at (x, y), 14 px wide and `height` tall, filled with a
/// <linearGradient id="`gradient_id`"> through `stops`, `lo` at the bottom and `hi` at the top, titled
/// `label` above it, with a tick and a label at each of `ticks`. The id must be unique in the document.
void colour_bar(std::string& out, double x, double y, double height, std::span<const Rgb> stops,
                std::string_view gradient_id, std::string_view label, double lo, double hi,
                std::span<const double> ticks);

}  // namespace tapegrad::svg
