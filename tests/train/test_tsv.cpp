// label<TAB>text files: a good file, CRLF and BOM, every error with file:line, UTF-8 validation, and
// the seeded split.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "autograd/error.h"
#include "support/temp_dir.h"
#include "train/data/tsv.h"

using namespace tapegrad;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {


std::string error_of(const std::string& path) {
  try {
    read_tsv(path);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("train: read_tsv reads labels and texts, skipping blank lines") {
  TempDir dir("tapegrad_test_tsv");
  const std::string path = dir.file("good.tsv",
                                    "\xef\xbb\xbfpos\tgreat film\r\n"
                                    "\n"
                                    "neg\t  dull\tand   long \r\n"
                                    "   \t  \r\n"
                                    "중립\t나는 최근 파리 여행을 다녀왔다\n"
                                    "pos\tloved it");
  const LabelledData data = read_tsv(path);
  REQUIRE(data.examples.size() == 4);
  CHECK(data.examples[0] == Example{"pos", "great film"});
  CHECK(data.examples[1] == Example{"neg", "  dull\tand   long "});
  CHECK(data.examples[2] == Example{"중립", "나는 최근 파리 여행을 다녀왔다"});
  CHECK(data.examples[3] == Example{"pos", "loved it"});
  CHECK(sorted_labels(data.examples) == std::vector<std::string>{"neg", "pos", "중립"});
}

TEST_CASE("train: every malformed TSV line is an IOError with file:line") {
  TempDir dir("tapegrad_test_tsv");
  const std::string ok = "a\tfine text\n";
  struct Case {
    std::string name, contents, line, what;
  };
  const std::vector<Case> cases = {
      {"no_tab.tsv", ok + "\n" + "label only\n", ":3:", "no tab"},
      {"empty_label.tsv", ok + "\tsome text\n", ":2:", "empty label"},
      {"empty_text.tsv", ok + ok + "b\t\n", ":3:", "empty text"},
      {"blank_text.tsv", "b\t  \t \r\n", ":1:", "empty text"},
      {"spaced_label.tsv", ok + "b \ttext\n", ":2:", "whitespace"},
      {"lone_continuation.tsv", ok + "a\tbad \x80 byte\n", ":2:", "invalid UTF-8 at byte 7"},
      {"overlong.tsv", "a\t\xc0\xaf\n", ":1:", "invalid UTF-8"},
      {"surrogate.tsv", ok + ok + ok + "a\t\xed\xa0\x80\n", ":4:", "invalid UTF-8"},
      {"truncated_sequence.tsv", "a\tx \xe4\xb8\n", ":1:", "invalid UTF-8"},
      {"above_max.tsv", "a\t\xf4\x90\x80\x80\n", ":1:", "invalid UTF-8"},
      {"bad_label_bytes.tsv", "\xff\ttext\n", ":1:", "invalid UTF-8"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(c.name, c.contents);
    INFO(c.name);
    CHECK_THAT(error_of(path), Catch::StartsWith(path + c.line) && Catch::Contains(c.what));
  }
  const std::string empty = dir.file("empty.tsv", "");
  CHECK_THAT(error_of(empty), Catch::StartsWith(empty + ": ") && Catch::Contains("empty file"));
  const std::string blank = dir.file("blank.tsv", "\n  \r\n\t\n");
  CHECK_THAT(error_of(blank), Catch::StartsWith(blank + ": ") && Catch::Contains("empty file"));
  const std::string missing = (dir.path / "missing.tsv").string();
  CHECK_THAT(error_of(missing), Catch::StartsWith(missing + ": ") && Catch::Contains("cannot open"));
  CHECK_THAT(error_of(dir.path.string()), Catch::Contains("directory"));
}

TEST_CASE("train: find_invalid_utf8 accepts UTF-8 and finds the first bad byte") {
  CHECK(find_invalid_utf8("") == 0);
  CHECK(find_invalid_utf8("plain ascii") == 11);
  const std::string valid = "é 나 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf";  // incl. U+10FFFF, U+D7FF
  CHECK(find_invalid_utf8(valid) == valid.size());
  CHECK(find_invalid_utf8("ab\x80") == 2);
  CHECK(find_invalid_utf8("\xc1\xbf") == 0);          // overlong 2-byte
  CHECK(find_invalid_utf8("\xe0\x80\xaf") == 0);      // overlong 3-byte
  CHECK(find_invalid_utf8("\xf0\x80\x80\xaf") == 0);  // overlong 4-byte
  CHECK(find_invalid_utf8("x\xed\xbf\xbf") == 1);     // surrogate U+DFFF
  CHECK(find_invalid_utf8("\xf5\x80\x80\x80") == 0);
  CHECK(find_invalid_utf8("\xe4\xb8") == 0);  // truncated at the end
  CHECK(find_invalid_utf8("\xe4x\xad") == 0);
}

TEST_CASE("train: split is a seeded, deterministic partition") {
  std::vector<Example> examples;
  for (int i = 0; i < 100; ++i) examples.push_back({i % 3 ? "a" : "b", "text " + std::to_string(i)});
  const Split s = split(examples, 0.2, 7);
  CHECK(s.valid.size() == 20);
  CHECK(s.train.size() == 80);
  std::set<std::string> texts;
  for (const Example& e : s.train) texts.insert(e.text);
  for (const Example& e : s.valid) texts.insert(e.text);
  CHECK(texts.size() == 100);
  // Each part keeps the input order.
  CHECK(std::is_sorted(s.valid.begin(), s.valid.end(), [&](const Example& x, const Example& y) {
    return std::stoi(x.text.substr(5)) < std::stoi(y.text.substr(5));
  }));
  const Split again = split(examples, 0.2, 7);
  CHECK(again.train == s.train);
  CHECK(again.valid == s.valid);
  CHECK(split(examples, 0.2, 8).valid != s.valid);

  CHECK(split(examples, 0, 7).train == examples);
  CHECK(split(examples, 0, 7).valid.empty());
  const std::vector<Example> two(examples.begin(), examples.begin() + 2);
  CHECK(split(two, 0.01, 1).valid.size() == 1);  // rounds to 0, raised to 1
  CHECK(split(two, 0.9, 1).train.size() == 1);   // rounds to 2, train keeps 1
  CHECK(split({}, 0.5, 1).train.empty());
  CHECK_THROWS_AS(split(examples, 1.0, 1), ValueError);
  CHECK_THROWS_AS(split(examples, -0.1, 1), ValueError);
}
