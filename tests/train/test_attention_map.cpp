// attention.svg (train/attention_map.h): one rect per attention cell, escaped tokens, both dtypes and
// a batch dim, loud errors for shapes that do not match the tokens.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "autograd/autograd.h"
#include "support/cli.h"
#include "support/svg_document.h"
#include "support/temp_dir.h"
#include "train/attention_map.h"

using namespace tapegrad;
using namespace tapegrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

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

TEST_CASE("train: attention map: one rect per cell, escaped tokens, both dtypes and a batch dim") {
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "attention.svg";
  const std::vector<std::string> tokens = {"[CLS]",      "<b>",  "a&b",
                                           "say \"hi\"", "it's", "supercalifragilisticexpialidocious"};
  const int64_t T = 6;
  const Tensor layer0 = random_attention(2, T, 1);
  const Tensor layer1 = random_attention(3, T, 2, DType::float64).to(DType::float64);
  const Tensor batched = tensor(layer1.to_vector(), Shape{1, 3, T, T}, DType::float64);
  write_attention_svg(path, tokens, {layer0, batched}, "attention <test> & more");
  const std::string svg = read_file(path);
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
  const std::string small = read_file(path);
  CHECK(count(small, "fill=\"#ffffff\"") == 2);
  CHECK(count(small, "fill=\"#08306b\"") == 2);
}

TEST_CASE("train: attention map with no layers or no tokens") {
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "edge.svg";
  write_attention_svg(path, {"a", "b"}, {}, "no layers");
  std::string svg = read_file(path);
  check_svg_document(svg);
  CHECK(cells_per_panel(svg).empty());
  write_attention_svg(path, {}, {zeros({2, 0, 0})}, "no tokens");
  svg = read_file(path);
  check_svg_document(svg);
  CHECK(cells_per_panel(svg) == std::vector<size_t>{0, 0});
}

TEST_CASE("train: attention map rejects shapes that do not match the tokens") {
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "bad.svg";
  const std::vector<std::string> tokens = {"a", "b", "c"};
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {zeros({2, 4, 4})}, "t"), ShapeError);
  CHECK_THROWS_WITH(write_attention_svg(path, tokens, {zeros({2, 3, 3}), zeros({2, 3, 4})}, "t"),
                    Contains("weights[1]") && Contains("[2,3,4]") && Contains("3 tokens"));
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {zeros({2, 2, 3, 3})}, "t"), ShapeError);  // batch of 2
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {zeros({3, 3})}, "t"), ShapeError);
  CHECK_THROWS_AS(write_attention_svg(path, tokens, {ids({0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 3, 3})}, "t"), DTypeError);
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("train: attention map unwritable paths are IOErrors naming the path") {
  TempDir dir("tapegrad_test_svg");
  const std::string missing = dir / "no/such/dir/attention.svg";
  CHECK_THROWS_AS(write_attention_svg(missing, {"a"}, {ones({1, 1, 1})}, "t"), IOError);
  CHECK_THROWS_WITH(write_attention_svg(missing, {"a"}, {ones({1, 1, 1})}, "t"), Contains(missing));
}
