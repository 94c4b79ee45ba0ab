// curves.svg (train/report/curves.h): one polyline point per finite value, gaps where values are NaN or
// infinite, a well-formed standalone file whatever the rows, and IOErrors naming unwritable paths.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "autograd/error.h"
#include "support/cli.h"
#include "support/svg_document.h"
#include "support/temp_dir.h"
#include "train/report/curves.h"

using namespace tapegrad;
using namespace tapegrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

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

}  // namespace

TEST_CASE("train: curves: one point per finite value, a well-formed standalone file") {
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "curves.svg";
  const auto rows = sample_run();
  write_curves_svg(path, rows, "majority <tiny> & \"fast\"");
  const std::string svg = read_file(path);
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

TEST_CASE("train: curves skip NaN and infinite values, leaving a gap") {
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "nan.svg";
  std::vector<MetricsRow> rows = {row(1, 2.0, 2.1, 0.2),    row(2, kNaN),
                                  row(3, kInf, kInf, kInf), row(4, 1.5),
                                  row(5, -kInf, 1.7, kNaN), row(6, 1.0, kNaN, 0.6)};
  write_curves_svg(path, rows, "nan run");
  const std::string svg = read_file(path);
  check_svg_document(svg);
  CHECK(polyline_points(svg, "train-loss") == 3);
  CHECK(polyline_points(svg, "valid-loss") == 2);
  CHECK(polyline_points(svg, "valid-accuracy") == 2);
  // A missing value where one was expected splits the line instead of bridging the gap.
  CHECK(count(svg, "<polyline class=\"train-loss\"") == 3);
  CHECK(count(svg, "<polyline class=\"valid-loss\"") == 2);
  CHECK_THAT(svg, Contains("7 non-finite values (NaN/inf) left out"));
}

TEST_CASE("train: curves with no rows, one row or constant values") {
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "small.svg";

  write_curves_svg(path, {}, "empty");
  std::string svg = read_file(path);
  check_svg_document(svg);
  CHECK(count(svg, "<polyline") == 0);
  CHECK_THAT(svg, Contains("no finite loss values"));

  write_curves_svg(path, {row(0, 0.7, 0.8, 0.5)}, "one row");
  svg = read_file(path);
  check_svg_document(svg);
  CHECK(polyline_points(svg, "train-loss") == 1);
  CHECK(count(svg, "<circle") >= 3);  // a single point still shows, as a dot

  std::vector<MetricsRow> constant;
  for (int64_t s = 0; s < 5; ++s) constant.push_back(row(5, 1.0, 1.0, 1.0));  // same step, same values
  write_curves_svg(path, constant, "constant");
  svg = read_file(path);
  check_svg_document(svg);
  CHECK(polyline_points(svg, "train-loss") == 5);
  CHECK(svg.find("nan") == std::string::npos);

  std::vector<MetricsRow> all_nan = {row(1, kNaN), row(2, kInf)};
  write_curves_svg(path, all_nan, "all nan");
  svg = read_file(path);
  check_svg_document(svg);
  CHECK(count(svg, "<polyline") == 0);
}

TEST_CASE("train: curves unwritable paths are IOErrors naming the path") {
  TempDir dir("tapegrad_test_svg");
  const std::string missing = dir / "no/such/dir/curves.svg";
  CHECK_THROWS_AS(write_curves_svg(missing, sample_run(), "t"), IOError);
  CHECK_THROWS_WITH(write_curves_svg(missing, sample_run(), "t"), Contains(missing));
  // A directory in the way: the temporary is written, the rename fails, and the temporary is cleaned up.
  const std::string blocked = dir / "blocked";
  fs::create_directories(fs::path(blocked) / "inside");
  CHECK_THROWS_AS(write_curves_svg(blocked, sample_run(), "t"), IOError);
  CHECK_FALSE(fs::exists(blocked + ".tmp"));
}
