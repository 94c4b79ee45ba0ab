#include "train/report/svg.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "autograd/error.h"
#include "train/io/text_lines.h"

namespace tapegrad::svg {

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
  while (!text.empty()) {
    // Up to `bad` the text is valid UTF-8 (no overlong forms, surrogates or > U+10FFFF): ASCII is
    // escaped, the bytes of multi-byte characters (all >= 0x80) are copied as they are.
    const size_t bad = find_invalid_utf8(text);
    for (const char c : text.substr(0, bad)) {
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
        default: {
          const auto u = static_cast<unsigned char>(c);
          out += (u < 0x20 || u == 0x7f) ? '?' : c;  // XML forbids most controls
        }
      }
    }
    if (bad == text.size()) break;
    out += "\xEF\xBF\xBD";  // U+FFFD for the one bad byte, then resynchronise after it
    text.remove_prefix(bad + 1);
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

double Scale::operator()(double v) const {
  const double p = p0 + (v - d0) / (d1 - d0) * (p1 - p0);
  return std::clamp(p, std::min(p0, p1), std::max(p0, p1));
}

std::string num(double v, int decimals) {
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

std::string num_general(double v, int digits) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::general, digits);
  return ec == std::errc() ? std::string(buffer, end) : "?";
}

std::string tick_label(double v, const NiceAxis& axis) {
  if (std::max(std::fabs(axis.lo), std::fabs(axis.hi)) >= 1e7 || axis.step < 1e-5) return num_general(v, 4);
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(axis.step) + 1e-9)), 0, 6);
  return num(v, decimals);
}

double text_width(std::string_view text, double font_size) {
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return 0.62 * font_size * static_cast<double>(chars);
}

std::string header(double width, double height) {
  const std::string w = num(std::ceil(width), 0), h = num(std::ceil(height), 0);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n" +
         "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
}

void text(std::string& out, double x, double y, std::string_view content, std::string_view attrs) {
  out += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"";
  if (!attrs.empty()) (out += ' ') += attrs;
  out += '>' + xml_escape(content) + "</text>\n";
}

void line(std::string& out, double x1, double y1, double x2, double y2, std::string_view attrs) {
  out += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\" ";
  (out += attrs) += "/>\n";
}

std::string hex_colour(const Rgb& c) {
  constexpr const char* digits = "0123456789abcdef";
  std::string s = "#";
  for (int v : c) {
    s += digits[(v >> 4) & 15];
    s += digits[v & 15];
  }
  return s;
}

std::string colour_at(std::span<const Rgb> stops, double t) {
  if (stops.size() < 2) throw ValueError(cat("svg::colour_at: a colour scale needs at least 2 stops, got ", stops.size()));
  const double u = std::clamp(t, 0.0, 1.0) * static_cast<double>(stops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(u), stops.size() - 2);  // t = 1 interpolates the last pair
  const double f = u - static_cast<double>(i);
  Rgb rgb;
  for (size_t c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
  return hex_colour(rgb);
}

void colour_bar(std::string& out, double x, double y, double height, std::span<const Rgb> stops,
                std::string_view gradient_id, std::string_view label, double lo, double hi,
                std::span<const double> ticks) {
  const std::string id = xml_escape(gradient_id);
  out += "<defs><linearGradient id=\"" + id + "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (size_t i = 0; i < stops.size(); ++i)
    out += "<stop offset=\"" + num(static_cast<double>(i) / static_cast<double>(std::max<size_t>(stops.size() - 1, 1)), 3) +
           "\" stop-color=\"" + hex_colour(stops[i]) + "\"/>\n";
  out += "</linearGradient></defs>\n<g class=\"colour-bar\">\n";
  text(out, x, y - 8, label, "font-size=\"11\" fill=\"#333333\"");
  out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"14\" height=\"" + num(height) + "\" fill=\"url(#" + id +
         ")\" stroke=\"#999999\"/>\n";
  const Scale to_y{lo, hi, y + height, y};
  for (double v : ticks) {
    const double ty = to_y(v);
    line(out, x + 14, ty, x + 18, ty, "stroke=\"#666666\"");
    text(out, x + 21, ty + 4, num(v, 2), "font-size=\"10\" fill=\"#333333\"");
  }
  out += "</g>\n";
}

}  // namespace tapegrad::svg
