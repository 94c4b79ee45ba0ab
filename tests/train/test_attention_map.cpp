// attention.svg (train/report/attention_map.h): one rect per attention cell, escaped tokens, both dtypes and
// a batch dim, loud errors for shapes that do not match the tokens.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "autograd/autograd.h"
#include "support/cli.h"
#include "support/svg_document.h"
#include "support/temp_dir.h"
#include "train/report/attention_map.h"

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

TEST_CASE("train: attention map replaces only an attention map it wrote, at a path ending in .svg") {
  TempDir dir("tapegrad_test_svg");
  const std::vector<std::string> tokens = {"a", "b"};
  const Tensor w = random_attention(2, 2, 3);
  const std::string map = dir / "attention.svg";
  check_attention_map_path(map);  // nothing there yet
  write_attention_svg(map, tokens, {w}, "first");
  CHECK_THAT(read_file(map), Contains(kAttentionMapMark));
  write_attention_svg(map, tokens, {w}, "second");  // its own map: replaced
  CHECK_THAT(read_file(map), Contains("second"));

  // Each refused path keeps its bytes: a checkpoint's files, an SVG someone else wrote (curves.svg too),
  // an empty file, a directory.
  const std::string curves =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"10\" height=\"10\">\n</svg>\n";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {dir.file("model.safetensors", std::string("\x08\0\0\0\0\0\0\0{}      ", 16)), "does not end in .svg"},
      {dir.file("config.json", "{}"), "does not end in .svg"},
      {dir.file("attention.SVG.bak", "x"), "does not end in .svg"},
      {dir.file("curves.svg", curves), "exists and is not an attention map tapegrad wrote"},
      {dir.file("empty.svg", ""), "exists and is not an attention map tapegrad wrote"},
      {dir.file("notes.svg", std::string("<!-- ") + kAttentionMapMark + " -->"), "is not an attention map"},
  };
  for (const auto& [path, problem] : refused) {
    INFO(path);
    const std::string before = read_file(path);
    CHECK_THROWS_WITH(check_attention_map_path(path), Contains(path) && Contains(problem));
    CHECK_THROWS_AS(write_attention_svg(path, tokens, {w}, "t"), IOError);
    CHECK(read_file(path) == before);
  }
  fs::create_directory(dir / "folder.svg");
  CHECK_THROWS_WITH(check_attention_map_path(dir / "folder.svg"), Contains("is a directory"));
}

TEST_CASE("train: attention map size is bounded: more tokens than the limit for its heatmaps is refused") {
  // floor(sqrt(2^20 / panels)): the largest T with panels x T² <= 2^20 cells.
  for (const auto& [panels, tokens] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1024}, {2, 724}, {3, 591}, {4, 512}, {16, 256}, {1000, 32}, {int64_t{1} << 20, 1}, {int64_t{1} << 21, 0}}) {
    INFO(panels << " panels");
    const int64_t limit = attention_map_token_limit(panels);
    CHECK(limit == tokens);
    CHECK(panels * limit * limit <= kAttentionMapCells);
    CHECK(panels * (limit + 1) * (limit + 1) > kAttentionMapCells);
  }
  TempDir dir("tapegrad_test_svg");
  const std::string path = dir / "long.svg";
  const auto tokens_of = [](int64_t n) { return std::vector<std::string>(static_cast<size_t>(n), "t"); };
  // 16 heatmaps of 257 tokens: one over the limit of 256; 256 is drawn.
  CHECK_THROWS_WITH(write_attention_svg(path, tokens_of(257), {zeros({16, 257, 257})}, "t"),
                    Contains("257 tokens is more than the 256 an attention map of 16 heatmaps draws"));
  CHECK_FALSE(fs::exists(path));
  write_attention_svg(path, tokens_of(256), {zeros({8, 256, 256}), zeros({8, 256, 256})}, "t");
  CHECK(cells_per_panel(read_file(path)) == std::vector<size_t>(16, 256 * 256));
}
