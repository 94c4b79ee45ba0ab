// Vocab: the whitespace tokenizer of the seed's example 2.1, its reserved ids, and vocab.txt.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "autograd/error.h"
#include "support/temp_dir.h"
#include "train/data/vocab.h"

using namespace tapegrad;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {


std::string error_of(const std::string& path) {
  try {
    Vocab::load(path);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("train: split_words splits on runs of ASCII whitespace") {
  CHECK(split_words("  나는 최근\t파리\n\n여행을 \r\n다녀왔다  ") ==
        std::vector<std::string>{"나는", "최근", "파리", "여행을", "다녀왔다"});
  CHECK(split_words("").empty());
  CHECK(split_words(" \t\n\v\f\r ").empty());
  CHECK(split_words("one") == std::vector<std::string>{"one"});
}

TEST_CASE("train: Vocab::build numbers words by first appearance after the reserved tokens") {
  // The seed's example 2.1: str2idx gives 나는 0 ... 다녀왔다 4; ours is shifted by the three reserved ids.
  const Vocab vocab = Vocab::build({"나는 최근 파리 여행을 다녀왔다", "파리 나는 새로운"});
  CHECK(vocab.size() == 9);
  CHECK(vocab.token(0) == "<pad>");
  CHECK(vocab.token(1) == "<unk>");
  CHECK(vocab.token(2) == "<cls>");
  CHECK(vocab.encode("나는 최근 파리 여행을 다녀왔다") == std::vector<int64_t>{3, 4, 5, 6, 7});
  CHECK(vocab.id("새로운") == 8);
  CHECK(Vocab::build({"b a", "c a"}).tokens() == std::vector<std::string>{"<pad>", "<unk>", "<cls>", "b", "a", "c"});
  CHECK(Vocab().size() == 3);
}

TEST_CASE("train: Vocab encodes unknown words as <unk> and decodes ids back to text") {
  const Vocab vocab = Vocab::build({"the cat sat"});
  CHECK(vocab.encode("the dog sat") == std::vector<int64_t>{3, Vocab::kUnk, 5});
  CHECK(vocab.id("dog") == Vocab::kUnk);
  CHECK_FALSE(vocab.contains("dog"));
  CHECK(vocab.contains("cat"));
  CHECK(vocab.encode("   ").empty());
  CHECK(vocab.decode(vocab.encode("  the   cat\tsat ")) == "the cat sat");
  CHECK(vocab.decode({2, 3, 1, 0}) == "<cls> the <unk> <pad>");
  CHECK_THROWS_AS(vocab.decode({6}), ValueError);
  CHECK_THROWS_AS(vocab.token(-1), ValueError);
  // A word spelled like a reserved token keeps the reserved id.
  CHECK(Vocab::build({"<unk> x"}).encode("<unk> x") == std::vector<int64_t>{1, 3});
}

TEST_CASE("train: Vocab save and load round trip") {
  TempDir dir("tapegrad_test_vocab");
  const Vocab vocab = Vocab::build({"나는 최근 파리", "zebra ünïcödé 42"});
  const std::string path = (dir.path / "vocab.txt").string();
  vocab.save(path);
  std::ifstream in(path, std::ios::binary);
  const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(contents == "<pad>\n<unk>\n<cls>\n나는\n최근\n파리\nzebra\nünïcödé\n42\n");
  const Vocab loaded = Vocab::load(path);
  CHECK(loaded == vocab);
  CHECK(loaded.id("파리") == 5);
  // CRLF line ends and a missing final newline are accepted.
  CHECK(Vocab::load(dir.file("crlf.txt", "<pad>\r\n<unk>\r\n<cls>\r\nx\r\ny")).tokens() ==
        std::vector<std::string>{"<pad>", "<unk>", "<cls>", "x", "y"});
  CHECK(Vocab::load(dir.file("reserved_only.txt", "<pad>\n<unk>\n<cls>\n")).size() == 3);
}

TEST_CASE("train: malformed vocab.txt is an IOError naming the file and line") {
  TempDir dir("tapegrad_test_vocab");
  const std::string head = "<pad>\n<unk>\n<cls>\n";
  const std::string empty_line = dir.file("empty_line.txt", head + "a\n\nb\n");
  CHECK_THAT(error_of(empty_line), Catch::Contains(empty_line + ":5:") && Catch::Contains("empty line"));
  const std::string dup = dir.file("dup.txt", head + "a\nb\na\n");
  CHECK_THAT(error_of(dup),
             Catch::Contains(dup + ":6:") && Catch::Contains("duplicate token 'a'") && Catch::Contains("line 4"));
  const std::string swapped = dir.file("swapped.txt", "<unk>\n<pad>\n<cls>\na\n");
  CHECK_THAT(error_of(swapped), Catch::Contains(swapped + ":1:") && Catch::Contains("<pad>"));
  const std::string late = dir.file("late.txt", "<pad>\n<unk>\na\n<cls>\n");
  CHECK_THAT(error_of(late), Catch::Contains(late + ":3:") && Catch::Contains("<cls>"));
  const std::string reserved_again = dir.file("reserved_again.txt", head + "<pad>\n");
  CHECK_THAT(error_of(reserved_again), Catch::Contains(reserved_again + ":4:") && Catch::Contains("duplicate"));
  const std::string short_file = dir.file("short.txt", "<pad>\n<unk>\n");
  CHECK_THAT(error_of(short_file), Catch::Contains(short_file + ":3:") && Catch::Contains("missing"));
  const std::string empty_file = dir.file("empty.txt", "");
  CHECK_THAT(error_of(empty_file), Catch::Contains(empty_file + ": empty file"));
  const std::string spaced = dir.file("spaced.txt", head + "two words\n");
  CHECK_THAT(error_of(spaced), Catch::Contains(spaced + ":4:") && Catch::Contains("whitespace"));
  const std::string missing = (dir.path / "no_such_vocab.txt").string();
  CHECK_THAT(error_of(missing), Catch::Contains(missing) && Catch::Contains("cannot open"));
  CHECK_THAT(error_of(dir.path.string()), Catch::Contains("directory"));
  CHECK_THROWS_AS(Vocab().save((dir.path / "no_dir" / "vocab.txt").string()), IOError);
}
