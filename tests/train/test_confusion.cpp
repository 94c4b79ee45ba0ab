// The confusion matrix (train/report/confusion.h): sparse counts whose memory follows the pairs seen, not K²; the
// table prints every label whole (no two read the same, no UTF-8 character split); past 16 classes a
// bounded summary replaces the table.
#include <catch2/catch.hpp>

#include "autograd/error.h"
#include "support/cli.h"
#include "train/report/confusion.h"
#include "train/io/text_lines.h"

using namespace tapegrad;
using testing::lines_of;

TEST_CASE("train: confusion counts pairs sparsely, for any number of classes") {
  for (const int64_t K : {int64_t{2}, int64_t{65536}, int64_t{1} << 40}) {
    INFO("K = " << K);
    Confusion confusion(K);
    confusion.add(0, 0);
    confusion.add(0, 0);
    confusion.add(K - 1, 0);
    confusion.add(1, K - 1);
    CHECK(confusion.cells().size() == 3);  // memory: the distinct pairs, whatever K is
    CHECK(confusion.at(0, 0) == 2);
    CHECK(confusion.at(K - 1, 0) == 1);
    CHECK(confusion.at(1, K - 1) == 1);
    CHECK(confusion.at(1, 0) == (K == 2 ? 1 : 0));
    CHECK_THROWS_AS(confusion.add(K, 0), ValueError);
    CHECK_THROWS_AS(confusion.add(0, -1), ValueError);
    if (K <= kConfusionDenseClasses) {
      const auto dense = confusion.dense();
      REQUIRE(dense.size() == static_cast<size_t>(K));
      CHECK(dense[0][0] == 2);
    } else {
      CHECK_THROWS_AS(confusion.dense(), ValueError);
    }
  }
}

TEST_CASE("train: confusion table prints labels whole, so none are merged or split") {
  // Labels sharing their first 8 bytes, one with a 2-byte character at the old 8-byte cut, one long.
  const std::vector<std::string> labels = {"sentiment_positive", "sentiment_negative", "caf\u00e9caf\u00e9s", "x"};
  Confusion confusion(4);
  confusion.add(0, 0);
  confusion.add(0, 1);
  confusion.add(2, 3);
  for (int i = 0; i < 1234567; i += 1000) confusion.add(3, 3);
  const std::string text = confusion_text(confusion, labels);
  INFO(text);
  CHECK(find_invalid_utf8(text) == text.size());
  const std::vector<std::string> lines = lines_of(text);
  REQUIRE(lines.size() == 2 + labels.size());
  for (const std::string& label : labels) CHECK_THAT(lines[1], Catch::Contains(label));
  for (size_t t = 0; t < labels.size(); ++t) {
    CHECK_THAT(lines[2 + t], Catch::Contains(labels[t]));
    CHECK((t == 3 || lines[2 + t].find(" 1235") == std::string::npos));
  }
  CHECK_THAT(lines[5], Catch::EndsWith(" 1235"));
  // Every row is as wide as the header, in code points: the columns line up whatever the labels hold.
  const auto width = [](const std::string& s) {
    return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; });
  };
  for (size_t i = 2; i < lines.size(); ++i) CHECK(width(lines[i]) == width(lines[1]));
  CHECK_THROWS_AS(confusion_text(confusion, {"a", "b"}), ValueError);
}

TEST_CASE("train: confusion of many classes prints a bounded summary of the most frequent confusions") {
  for (const int64_t K : {kConfusionTableClasses + 1, int64_t{65536}}) {
    INFO("K = " << K);
    std::vector<std::string> labels;
    for (int64_t k = 0; k < K; ++k) labels.push_back("class_" + std::to_string(k));
    Confusion confusion(K);
    // Class k is confused with k + 1 (k + 1) times for the first 40 classes, and right the rest of the time.
    int64_t wrong = 0;
    for (int64_t k = 0; k < std::min<int64_t>(K - 1, 40); ++k)
      for (int64_t n = 0; n <= k; ++n, ++wrong) confusion.add(k, k + 1);
    for (int64_t k = 0; k < K; ++k) confusion.add(k, k);
    const std::string text = confusion_text(confusion, labels);
    INFO(text);
    const std::vector<std::string> lines = lines_of(text);
    const int64_t pairs = std::min<int64_t>(K - 1, 40);
    REQUIRE(static_cast<int64_t>(lines.size()) == 2 + std::min(pairs, kConfusionSummaryRows));
    CHECK_THAT(lines[0], Catch::Contains(std::to_string(K) + " classes") &&
                             Catch::Contains(std::to_string(wrong) + " of " + std::to_string(wrong + K)) &&
                             Catch::Contains(std::to_string(pairs) + " distinct"));
    // The most frequent first: class pairs - 1 confused with class pairs, pairs times.
    CHECK_THAT(lines[2], Catch::Contains(cat(pairs, "  #", pairs - 1, " class_", pairs - 1, " -> #", pairs, " class_", pairs)));
    CHECK(text.size() < 4096);
  }
}
