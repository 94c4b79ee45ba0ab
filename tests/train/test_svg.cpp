// SVG primitives (train/report/svg.h): nice axes step by 1, 2 or 5 x 10^k and cover the data; text is escaped
// for XML and labels are cut by code point; colour scales interpolate and the colour bar maps lo..hi upwards.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "autograd/error.h"
#include "train/report/svg.h"

using namespace tapegrad;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("train: svg nice axes step by 1, 2 or 5 x 10^k and cover the data") {
  using svg::nice_axis;
  const auto a = nice_axis(0, 1, 5);
  CHECK(a.lo == 0);
  CHECK(a.hi == Approx(1));
  CHECK(a.step == Approx(0.2));
  CHECK(a.ticks().size() == 6);

  const auto loss = nice_axis(0.013, 2.31, 5);
  CHECK(loss.step == Approx(0.5));
  CHECK(loss.lo == 0);
  CHECK(loss.hi == Approx(2.5));

  std::mt19937 gen(7);
  std::uniform_real_distribution<double> exponent(-6, 6), unit(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    const double lo = (unit(gen) - 0.5) * std::pow(10, exponent(gen));
    const double hi = lo + unit(gen) * std::pow(10, exponent(gen));
    const auto axis = nice_axis(lo, hi, 6);
    INFO("lo " << lo << " hi " << hi << " step " << axis.step);
    CHECK(axis.lo <= lo);
    CHECK(axis.hi >= hi);
    const double mantissa = axis.step / std::pow(10, std::floor(std::log10(axis.step) + 1e-9));
    CHECK((mantissa == Approx(1) || mantissa == Approx(2) || mantissa == Approx(5)));
    const auto ticks = axis.ticks();
    CHECK(ticks.size() >= 3);
    CHECK(ticks.size() <= 14);
  }

  // Degenerate and non-finite ranges still give a usable axis; min_step keeps step ticks integral.
  for (auto [lo, hi] : {std::pair{3.0, 3.0}, {0.0, 0.0}, {-2.5, -2.5}, {kNaN, 1.0}, {0.0, kInf}, {1e9, 1e9 + 1e-7}}) {
    const auto axis = nice_axis(lo, hi, 5);
    CHECK(axis.hi > axis.lo);
    CHECK(axis.step > 0);
    if (std::isfinite(lo) && std::isfinite(hi)) CHECK((axis.lo <= lo && axis.hi >= hi));
  }
  CHECK(nice_axis(7, 7, 7, 1).step == 1);
  CHECK(nice_axis(0, 1000, 7, 1).step == 100);
  CHECK(nice_axis(3, 1, 5).lo <= 1);  // reversed bounds are swapped
}

TEST_CASE("train: svg escape XML and truncate labels by code point") {
  CHECK(svg::xml_escape("a&b <c> \"d\" 'e'") == "a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;");
  CHECK(svg::xml_escape("caf\xC3\xA9 \xE2\x86\x92") == "caf\xC3\xA9 \xE2\x86\x92");  // valid UTF-8 kept
  CHECK(svg::xml_escape("bad\xFF!") == "bad\xEF\xBF\xBD!");                          // invalid byte -> U+FFFD
  CHECK(svg::xml_escape("tab\tnl\n") == "tab?nl?");                                  // no control chars
  // One U+FFFD per bad byte, resynchronising after it: a cut sequence, a surrogate (ED A0 80), a stray
  // continuation byte, with escaping and valid characters around them.
  CHECK(svg::xml_escape("\xE4\xB8x") == "\xEF\xBF\xBD\xEF\xBF\xBDx");
  CHECK(svg::xml_escape("<\xC3\xA9\xED\xA0\x80&\x80") ==
        "&lt;\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD&amp;\xEF\xBF\xBD");
  CHECK(svg::truncate_label("short", 14) == "short");
  CHECK(svg::truncate_label("abcdefghijklmnopqrstuvwxyz", 5) == "abcd\u2026");
  CHECK(svg::truncate_label("\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\xC3\xA9");
  CHECK(svg::truncate_label("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\u2026");  // never mid-character
}

TEST_CASE("train: svg colour scales interpolate between evenly spaced stops and clamp outside 0..1") {
  const std::array<svg::Rgb, 3> stops = {{{0, 0, 255}, {255, 255, 255}, {255, 0, 0}}};
  CHECK(svg::hex_colour({18, 52, 171}) == "#1234ab");
  CHECK(svg::colour_at(stops, 0) == "#0000ff");
  CHECK(svg::colour_at(stops, 0.5) == "#ffffff");
  CHECK(svg::colour_at(stops, 1) == "#ff0000");  // the last stop itself, not past the end of the array
  CHECK(svg::colour_at(stops, 0.25) == "#8080ff");  // halfway between the first two stops (127.5 rounds up)
  CHECK(svg::colour_at(stops, -3) == "#0000ff");
  CHECK(svg::colour_at(stops, 7) == "#ff0000");
  CHECK_THROWS_AS(svg::colour_at(std::span<const svg::Rgb>(stops.data(), 1), 0.5), ValueError);

  std::string bar;
  const std::array<double, 3> ticks = {-1, 0, 1};
  svg::colour_bar(bar, 10, 20, 100, stops, "rdbu", "value", -1, 1, ticks);
  CHECK_THAT(bar, Catch::Matchers::Contains("<linearGradient id=\"rdbu\""));
  CHECK_THAT(bar, Catch::Matchers::Contains("fill=\"url(#rdbu)\""));
  // -1 at the bottom (y + height), 1 at the top (y): the tick labels sit 4 px below their ticks.
  CHECK_THAT(bar, Catch::Matchers::Contains("<text x=\"31\" y=\"124\" font-size=\"10\" fill=\"#333333\">-1</text>"));
  CHECK_THAT(bar, Catch::Matchers::Contains("<text x=\"31\" y=\"24\" font-size=\"10\" fill=\"#333333\">1</text>"));
}
