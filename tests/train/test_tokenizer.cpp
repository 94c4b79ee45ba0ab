// The language model's tokenizers (train/data/tokenizer.h): round trips of every kind of character and of
// words, the saved file, and bad text and bad files, each refused in one line.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "support/temp_dir.h"
#include "train/data/tokenizer.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using testing::TempDir;

namespace {
// ASCII, a tab and newlines, 2-byte (é), 3-byte (中) and 4-byte (😀) UTF-8, repeated characters.
const std::string kText = "Hello, world!\n\tcafé 中文 😀\nhello again\n";
}  // namespace

TEST_CASE("tokenizer: characters: every code point is a token and decode(encode(text)) is the text") {
  const Tokenizer t = Tokenizer::learn(Tokenizer::Kind::characters, kText);
  const std::vector<int64_t> ids = t.encode(kText);
  CHECK(ids.size() == 37);  // code points, not bytes (45)
  CHECK(t.decode(ids) == kText);
  CHECK(std::find(ids.begin(), ids.end(), Tokenizer::kUnk) == ids.end());
  // <unk> first, then the characters by code point: '\t' (9) is id 1, '\n' (10) id 2, ' ' (32) id 3.
  CHECK(t.token(0) == "<unk>");
  CHECK(t.encode("\t\n ") == std::vector<int64_t>{1, 2, 3});
  CHECK(t.token(t.vocab_size() - 1) == "😀");  // the largest code point is last
  // A character the text did not have is <unk>, and reads "<unk>".
  CHECK(t.encode("Hx") == std::vector<int64_t>{t.encode("H").at(0), Tokenizer::kUnk});
  CHECK(t.decode(t.encode("Hx")) == "H<unk>");
  // The same text gives the same tokenizer.
  CHECK(Tokenizer::learn(Tokenizer::Kind::characters, kText) == t);
}

TEST_CASE("tokenizer: words: runs of non-whitespace, decoded joined by single spaces") {
  const Tokenizer t = Tokenizer::learn(Tokenizer::Kind::words, kText);
  CHECK(t.vocab_size() == 1 + 7);  // <unk>, then Hello, world! café 中文 😀 hello again in order of first appearance
  CHECK(t.token(1) == "Hello,");
  CHECK(t.decode(t.encode(kText)) == "Hello, world! café 中文 😀 hello again");
  CHECK(t.encode("hello there") == std::vector<int64_t>{t.encode("hello").at(0), Tokenizer::kUnk});
}

TEST_CASE("tokenizer: tokenizer.json saves and loads the same tokenizer, and a damaged one is refused by name") {
  TempDir dir("tapegrad_test_tokenizer");
  for (const Tokenizer::Kind kind : {Tokenizer::Kind::characters, Tokenizer::Kind::words}) {
    const Tokenizer t = Tokenizer::learn(kind, kText);
    const std::string path = dir / "tokenizer.json";
    t.save(path);
    CHECK(Tokenizer::load(path) == t);
  }
  const auto refused = [&](const std::string& content, const std::string& message) {
    const std::string path = dir / "bad.json";
    std::ofstream(path) << content;
    INFO(content);
    CHECK_THROWS_AS(Tokenizer::load(path), IOError);
    CHECK_THROWS_WITH(Tokenizer::load(path), Contains(path) && Contains(message));
  };
  refused("", "empty");
  refused("not json", "");
  refused(R"({"kind": "bytes", "tokens": ["<unk>"]})", "unknown tokenizer 'bytes' (known: characters or words)");
  refused(R"({"kind": "characters"})", "'tokens' must be a non-empty list of strings");
  refused(R"({"kind": "characters", "tokens": []})", "'tokens' must be a non-empty list of strings");
  refused(R"({"kind": "characters", "tokens": ["a", "<unk>"]})", "'tokens'[0] must be \"<unk>\"");
  refused(R"({"kind": "characters", "tokens": ["<unk>", "ab"]})", "'tokens'[1] must be one character, got \"ab\"");
  refused(R"({"kind": "characters", "tokens": ["<unk>", "a", "a"]})", "'tokens'[2] \"a\" appears twice");
  refused(R"({"kind": "characters", "tokens": ["<unk>", 7]})", "'tokens'[1] must be a string");
  refused(R"({"kind": "words", "tokens": ["<unk>", "two words"]})", "must be one word without whitespace");
  refused(R"({"kind": "words", "tokens": ["<unk>", ""]})", "must be non-empty UTF-8");
  refused(R"({"kind": "words", "tokens": ["<unk>"], "merges": []})", "unknown key 'merges'");
}

TEST_CASE("tokenizer: an empty, blank, binary or non-UTF-8 text is refused with the line") {
  CHECK_THROWS_WITH(check_corpus_text("", "corpus.txt"), "corpus.txt: empty: a language model needs text");
  CHECK_THROWS_WITH(check_corpus_text(" \n\t\n", "corpus.txt"),
                    "corpus.txt: whitespace only: a language model needs text");
  CHECK_THROWS_WITH(check_corpus_text(std::string("ok\nab\0c\n", 8), "corpus.txt"),
                    "corpus.txt:2: a NUL byte at byte 3 of the line: this is not a text file");
  CHECK_THROWS_WITH(check_corpus_text("ok\nfine\nbad \xC3\x28 here\n", "corpus.txt"),
                    "corpus.txt:3: invalid UTF-8 at byte 5 of the line");
  CHECK_NOTHROW(check_corpus_text(kText, "corpus.txt"));
  CHECK_THROWS_AS(Tokenizer::learn(Tokenizer::Kind::characters, ""), ValueError);
  const Tokenizer t = Tokenizer::learn(Tokenizer::Kind::characters, "abc");
  CHECK_THROWS_WITH(t.decode(std::vector<int64_t>{1, 4}), "tokenizer: id 4 is outside the vocabulary [0, 4)");
  CHECK_THROWS_WITH(t.encode("a\xFF"), "tokenizer: invalid UTF-8 at byte 2 of the text");
  CHECK_THROWS_WITH(tokenizer_kind("bpe"), "unknown tokenizer 'bpe' (known: characters or words)");
}
