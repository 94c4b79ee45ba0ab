// SVG plots: well-formed standalone files, one polyline point per finite value, one rect per attention
// cell, escaped tokens, loud errors for bad shapes and unwritable paths.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "autograd/autograd.h"
#include "train/plots.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A fresh directory under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device seed;
    path = fs::temp_directory_path() / ("tapegrad_plots_" + std::to_string(seed()) + std::to_string(seed()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// Empty when `svg` is well-formed in the XML sense we rely on (every tag closed in order, no raw '&'
/// outside an entity, no '<' inside text), else what is wrong.
std::string xml_problem(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t i = 0; i < svg.size(); ++i) {
    if (svg[i] == '&') {
      const size_t semi = svg.find(';', i);
      const std::string entity = semi == std::string::npos ? "" : svg.substr(i, semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" && entity != "&apos;")
        return "raw & at " + std::to_string(i);
      continue;
    }
    if (svg[i] != '<') continue;
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = svg.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside tag at " + std::to_string(i);
    if (tag.starts_with('/')) {
      if (open.empty() || open.back() != tag.substr(1)) return "unbalanced </" + tag.substr(1) + ">";
      open.pop_back();
    } else if (!tag.ends_with('/')) {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

/// The checks every picture passes: a standalone <svg> document, well-formed, fully written.
void check_svg_document(const std::string& svg) {
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(xml_problem(svg) == "");
  CHECK(count(svg, "<g ") + count(svg, "<g>") == count(svg, "</g>"));
}

/// Number of points over all <polyline class="css_class"> elements (0 when there are none).
size_t polyline_points(const std::string& svg, const std::string& css_class) {
  size_t n = 0;
  const std::string tag = "<polyline class=\"" + css_class + "\"";
  for (size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, at + 1)) {
    const size_t begin = svg.find("points=\"", at) + 8;
    std::istringstream points(svg.substr(begin, svg.find('"', begin) - begin));
    for (std::string p; points >> p;) {
      REQUIRE(count(p, ",") == 1);
      CHECK(std::isfinite(std::stod(p.substr(0, p.find(',')))));
      CHECK(std::isfinite(std::stod(p.substr(p.find(',') + 1))));
      ++n;
    }
  }
  return n;
}

MetricsRow row(int64_t step, double train_loss, double valid_loss = kNaN, double valid_accuracy = kNaN) {
  return {step, step / 100, 1e-3, train_loss, valid_loss, valid_accuracy, 50.0, step / 50.0};
}

/// A plausible run: the loss falls, validation every 50 steps, 4 epochs of 100 steps.
std::vector<MetricsRow> sample_run() {
  std::vector<MetricsRow> rows;
  for (int64_t step = 10; step <= 400; step += 10) {
    const double t = static_cast<double>(step);
    const bool valid = step % 50 == 0;
    rows.push_back(row(step, 0.05 + 2.0 * std::exp(-t / 80) + 0.05 * std::sin(t),
                       valid ? 0.1 + 2.0 * std::exp(-t / 90) : kNaN, valid ? 1.0 - 0.6 * std::exp(-t / 100) : kNaN));
  }
  return rows;
}

/// The <rect> count of every <g class="cells"> group, in order.
std::vector<size_t> cells_per_panel(const std::string& svg) {
  std::vector<size_t> cells;
  for (size_t at = svg.find("<g class=\"cells\""); at != std::string::npos;
       at = svg.find("<g class=\"cells\"", at + 1)) {
    const size_t end = svg.find("</g>", at);
    cells.push_back(count(svg.substr(at, end - at), "<rect "));
  }
  return cells;
}

/// Softmax rows of a seeded random (H,T,T) tensor: a realistic attention pattern.
Tensor random_attention(int64_t heads, int64_t tokens, uint64_t seed, DType dtype = DType::float32) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::normal_distribution<double> normal(0, 1.5);
  std::vector<double> w;
  for (int64_t r = 0; r < heads * tokens; ++r) {
    std::vector<double> e;
    double sum = 0;
    for (int64_t k = 0; k < tokens; ++k) sum += e.emplace_back(std::exp(normal(gen)));
    for (double v : e) w.push_back(v / sum);
  }
  return tensor(w, Shape{heads, tokens, tokens}, dtype);
}

}  // namespace

TEST_CASE("train: plots nice axes step by 1, 2 or 5 x 10^k and cover the data") {
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

TEST_CASE("train: plots escape XML and truncate labels by code point") {
  CHECK(svg::xml_escape("a&b <c> \"d\" 'e'") == "a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;");
  CHECK(svg::xml_escape("caf\xC3\xA9 \xE2\x86\x92") == "caf\xC3\xA9 \xE2\x86\x92");  // valid UTF-8 kept
  CHECK(svg::xml_escape("bad\xFF!") == "bad\xEF\xBF\xBD!");                          // invalid byte -> U+FFFD
  CHECK(svg::xml_escape("tab\tnl\n") == "tab?nl?");                                  // no control chars
  CHECK(svg::truncate_label("short", 14) == "short");
  CHECK(svg::truncate_label("abcdefghijklmnopqrstuvwxyz", 5) == "abcd\u2026");
  CHECK(svg::truncate_label("\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\xC3\xA9");
  CHECK(svg::truncate_label("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\u2026");  // never mid-character
}

TEST_CASE("train: plots curves: one point per finite value, a well-formed standalone file") {
  TempDir dir;
  const std::string path = dir.file("curves.svg");
  const auto rows = sample_run();
  write_curves_svg(path, rows, "majority <tiny> & \"fast\"");
  const std::string svg = read(path);
  check_svg_document(svg);
  CHECK_THAT(svg, Contains("majority &lt;tiny&gt; &amp; &quot;fast&quot;"));
  CHECK(polyline_points(svg, "train-loss") == 40);
  CHECK(polyline_points(svg, "valid-loss") == 8);
  CHECK(polyline_points(svg, "valid-accuracy") == 8);
  // Rows without validation do not break the validation lines: one polyline per series.
  for (const char* css_class : {"train-loss", "valid-loss", "valid-accuracy"})
    CHECK(count(svg, std::string("<polyline class=\"") + css_class + "\"") == 1);
  for (const char* part :
       {"train loss", "valid loss", "valid accuracy (%)", ">step<", "epoch 2", "best valid accuracy"})
    CHECK_THAT(svg, Contains(part));
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("train: plots curves skip NaN and infinite values, leaving a gap") {
  TempDir dir;
  const std::string path = dir.file("nan.svg");
  std::vector<MetricsRow> rows = {row(1, 2.0, 2.1, 0.2),    row(2, kNaN),
                                  row(3, kInf, kInf, kInf), row(4, 1.5),
                                  row(5, -kInf, 1.7, kNaN), row(6, 1.0, kNaN, 0.6)};
  write_curves_svg(path, rows, "nan run");
  const std::string svg = read(path);
  check_svg_document(svg);
  CHECK(polyline_points(svg, "train-loss") == 3);
  CHECK(polyline_points(svg, "valid-loss") == 2);
  CHECK(polyline_points(svg, "valid-accuracy") == 2);
  // A missing value where one was expected splits the line instead of bridging the gap.
  CHECK(count(svg, "<polyline class=\"train-loss\"") == 3);
  CHECK(count(svg, "<polyline class=\"valid-loss\"") == 2);
  CHECK_THAT(svg, Contains("7 non-finite values (NaN/inf) left out"));
}

TEST_CASE("train: plots curves with no rows, one row or constant values") {
  TempDir dir;
  const std::string path = dir.file("small.svg");

  write_curves_svg(path, {}, "empty");
  std::string svg = read(path);
  check_svg_document(svg);
  CHECK(count(svg, "<polyline") == 0);
  CHECK_THAT(svg, Contains("no finite loss values"));

  write_curves_svg(path, {row(0, 0.7, 0.8, 0.5)}, "one row");
  svg = read(path);
  check_svg_document(svg);
  CHECK(polyline_points(svg, "train-loss") == 1);
  CHECK(count(svg, "<circle") >= 3);  // a single point still shows, as a dot

  std::vector<MetricsRow> constant;
  for (int64_t s = 0; s < 5; ++s) constant.push_back(row(5, 1.0, 1.0, 1.0));  // same step, same values
  write_curves_svg(path, constant, "constant");
  svg = read(path);
  check_svg_document(svg);
  CHECK(polyline_points(svg, "train-loss") == 5);
  CHECK(svg.find("nan") == std::string::npos);

  std::vector<MetricsRow> all_nan = {row(1, kNaN), row(2, kInf)};
  write_curves_svg(path, all_nan, "all nan");
  svg = read(path);
  check_svg_document(svg);
  CHECK(count(svg, "<polyline") == 0);
}

TEST_CASE("train: plots attention: one rect per cell, escaped tokens, both dtypes and a batch dim") {
  TempDir dir;
  const std::string path = dir.file("attention.svg");
  const std::vector<std::string> tokens = {"[CLS]",      "<b>",  "a&b",
                                           "say \"hi\"", "it's", "supercalifragilisticexpialidocious"};
  const int64_t T = 6;
  const Tensor layer0 = random_attention(2, T, 1);
  const Tensor layer1 = random_attention(3, T, 2, DType::float64).to(DType::float64);
  const Tensor batched = tensor(layer1.to_vector(), Shape{1, 3, T, T}, DType::float64);
  write_attention_svg(path, tokens, {layer0, batched}, "attention <test> & more");
  const std::string svg = read(path);
  check_svg_document(svg);
  CHECK_THAT(svg, Contains("attention &lt;test&gt; &amp; more"));

  const auto cells = cells_per_panel(svg);
  REQUIRE(cells.size() == 5);
  for (size_t n : cells) CHECK(n == static_cast<size_t>(T * T));
  for (const char* title : {"layer 0, head 0", "layer 0, head 1", "layer 1, head 0", "layer 1, head 2"})
    CHECK_THAT(svg, Contains(title));
  CHECK_FALSE(svg.find("layer 0, head 2") != std::string::npos);

  for (const char* raw : {"<b>", "a&b", "say \"hi\"", "it's"}) CHECK(svg.find(raw) == std::string::npos);
  for (const char* escaped : {"&lt;b&gt;", "a&amp;b", "say &quot;hi&quot;", "it&apos;s", "supercalifrag\u2026"})
    CHECK_THAT(svg, Contains(escaped));
  CHECK_THAT(svg, Contains("linearGradient"));  // the colour bar
  // Weight 0 is white, 1 dark blue.
  const std::vector<double> extremes = {1, 0, 0, 1};
  write_attention_svg(path, {"x", "y"}, {tensor(extremes, Shape{1, 2, 2})}, "extremes");
  const std::string small = read(path);
  CHECK(count(small, "fill=\"#ffffff\"") == 2);
  CHECK(count(small, "fill=\"#08306b\"") == 2);
}

TEST_CASE("train: plots attention with no layers or no tokens") {
  TempDir dir;
  const std::string path = dir.file("edge.svg");
  write_attention_svg(path, {"a", "b"}, {}, "no layers");
  std::string svg = read(path);
  check_svg_document(svg);
  CHECK(cells_per_panel(svg).empty());
  write_attention_svg(path, {}, {zeros({2, 0, 0})}, "no tokens");
  svg = read(path);
  check_svg_document(svg);
  CHECK(cells_per_panel(svg) == std::vector<size_t>{0, 0});
}

TEST_CASE("train: plots attention rejects shapes that do not match the tokens") {
  TempDir dir;
  const std::string path = dir.file("bad.svg");
  const std::vector<std::string> tokens = {"a", "b", "c"};
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {zeros({2, 4, 4})}, "t"), ShapeError);
  CHECK_THROWS_WITH(write_attention_svg(path, tokens, {zeros({2, 3, 3}), zeros({2, 3, 4})}, "t"),
                    Contains("weights[1]") && Contains("[2,3,4]") && Contains("3 tokens"));
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {zeros({2, 2, 3, 3})}, "t"), ShapeError);  // batch of 2
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {zeros({3, 3})}, "t"), ShapeError);
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {ids({0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 3, 3})}, "t"), DTypeError);
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("train: plots unwritable paths are IOErrors naming the path") {
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/curves.svg");
  CHECK_THROWS_AS(write_curves_svg(missing, sample_run(), "t"), IOError);
  CHECK_THROWS_WITH(write_curves_svg(missing, sample_run(), "t"), Contains(missing));
  CHECK_THROWS_WITH(write_attention_svg(missing, {"a"}, {ones({1, 1, 1})}, "t"), Contains(missing));
  // A directory in the way: the temporary is written, the rename fails, and the temporary is cleaned up.
  const std::string blocked = dir.file("blocked");
  fs::create_directories(fs::path(blocked) / "inside");
  CHECK_THROWS_AS(write_curves_svg(blocked, sample_run(), "t"), IOError);
  CHECK_FALSE(fs::exists(blocked + ".tmp"));
}
