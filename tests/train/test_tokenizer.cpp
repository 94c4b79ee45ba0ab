// The language model's tokenizers (train/data/tokenizer.h): round trips of every kind of character, of
// words and of BPE subwords, the saved files, and bad text, bad files and bad sizes, each refused in one line.
#include <sentencepiece_trainer.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/error.h"
#include "support/temp_dir.h"
#include "train/data/streaming_decoder.h"
#include "train/data/tokenizer.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using testing::TempDir;

namespace {

/// Lines for SentencePiece's trainer, to make models of other layouts than tapegrad's learn_bpe.
struct SentenceLines : sentencepiece::SentenceIterator {
  explicit SentenceLines(std::vector<std::string> given) : lines(std::move(given)) {}
  std::vector<std::string> lines;
  size_t i = 0;
  bool done() const override { return i >= lines.size(); }
  void Next() override { ++i; }
  const std::string& value() const override { return lines[i]; }
  sentencepiece::util::Status status() const override { return {}; }
};

// ASCII, a tab and newlines, 2-byte (é), 3-byte (中) and 4-byte (😀) UTF-8, repeated characters.
const std::string kText = "Hello, world!\n\tcafé 中文 😀\nhello again\n";

// About 9 KB of English with what a BPE tokenizer must give back: single and double newlines, runs of
// spaces (leading and trailing ones too), tabs, 2-, 3- and 4-byte UTF-8, and U+2585, which SentencePiece's
// trainer would drop a whole line for. No 'Z' and no 'q': characters the tokenizer will not have.
std::string bpe_text() {
  const char* const lines[] = {
      "The cat sat on the mat, and the dog sat on the rug.",
      "  Two  spaces,   three; a café — naïve 日本 😀 ▅",
      "\tA tab starts this line and\tone sits inside it.  ",
      "",
      "the other dog sleeps in the sun, and the cat watches the other dog",
  };
  std::string text;
  for (int i = 0; i < 36; ++i)
    for (const char* line : lines) text += std::string(line) + "\n";
  return text + "no newline at the end";
}
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
  refused(R"({"kind": "bytes", "tokens": ["<unk>"]})", "unknown tokenizer 'bytes' (known: characters, words or bpe)");
  refused(R"({"kind": "characters"})", "'tokens' must be a non-empty list of strings");
  refused(R"({"kind": "characters", "tokens": []})", "'tokens' must be a non-empty list of strings");
  refused(R"({"kind": "characters", "tokens": ["a", "<unk>"]})", "'tokens'[0] must be \"<unk>\"");
  refused(R"({"kind": "characters", "tokens": ["<unk>", "ab"]})", "'tokens'[1] must be one character, got \"ab\"");
  refused(R"({"kind": "characters", "tokens": ["<unk>", "a", "a"]})", "'tokens'[2] \"a\" appears twice");
  refused(R"({"kind": "characters", "tokens": ["<unk>", 7]})", "'tokens'[1] must be a string");
  refused(R"({"kind": "words", "tokens": ["<unk>", "two words"]})", "must be one word without whitespace");
  // A token is shown as a JSON string: a newline in it (a characters tokenizer's "\n" read as words) stays
  // on the message's one line.
  refused(R"({"kind": "words", "tokens": ["<unk>", "\n"]})", R"('tokens'[1] must be one word without whitespace, got "\n")");
  refused(R"({"kind": "characters", "tokens": ["<unk>", "\n", "\n"]})", R"('tokens'[2] "\n" appears twice)");
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
  CHECK_THROWS_WITH(tokenizer_kind("bytes"), "unknown tokenizer 'bytes' (known: characters, words or bpe)");
  for (const Tokenizer::Kind kind : {Tokenizer::Kind::characters, Tokenizer::Kind::words, Tokenizer::Kind::bpe})
    CHECK(tokenizer_kind(tokenizer_kind_name(kind)) == kind);
}

TEST_CASE("tokenizer: bpe: the vocabulary size asked for, real merges, and decode(encode(text)) is the text") {
  const std::string text = bpe_text();
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer t = Tokenizer::learn_bpe(text, 120);
  INFO("learnt in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
  CHECK(t.kind() == Tokenizer::Kind::bpe);
  CHECK(t.vocab_size() == 120);
  const std::vector<int64_t> ids = t.encode(text);
  CHECK(t.decode(ids) == text);
  CHECK(std::find(ids.begin(), ids.end(), Tokenizer::kUnk) == ids.end());
  // It merges: far fewer tokens than characters, and tokens of several characters, spaces kept in them.
  CHECK(ids.size() * 3 < text.size());
  CHECK(t.encode("the cat").size() < 7);
  bool has_word_with_space = false;
  for (int64_t id = 0; id < t.vocab_size(); ++id) has_word_with_space |= t.token(id) == " the";
  CHECK(has_word_with_space);
  // Each id's token is its text: concatenated, the tokens are decode's text.
  std::string joined;
  for (const int64_t id : ids) joined += t.token(id);
  CHECK(joined == text);
  CHECK(t.token(0) == "<unk>");
  // A character the text did not have is <unk>, and reads "<unk>"; SentencePiece makes a run of them one
  // <unk>. U+2581 reads back as a space (tokenizer.h).
  CHECK(t.encode("Zq") == std::vector<int64_t>{Tokenizer::kUnk});
  CHECK(t.decode(t.encode("the Zoo")) == "the <unk>oo");
  CHECK(t.decode(t.encode("the\u2581cat")) == "the cat");
  // The same text gives the same model; another size, another one.
  CHECK(Tokenizer::learn_bpe(text, 120) == t);
  CHECK_FALSE(Tokenizer::learn_bpe(text, 100) == t);
  CHECK_FALSE(Tokenizer::learn(Tokenizer::Kind::characters, text) == t);
  CHECK_THROWS_WITH(t.decode(std::vector<int64_t>{1, 120}), "tokenizer: id 120 is outside the vocabulary [0, 120)");
  CHECK_THROWS_WITH(t.encode("a\xFF"), "tokenizer: invalid UTF-8 at byte 2 of the text");
}

TEST_CASE("tokenizer: bpe: tokenizer.json holds the whole model, and tokenizer.model beside it is SentencePiece's") {
  TempDir dir("tapegrad_test_tokenizer_bpe");
  const std::string text = bpe_text();
  const Tokenizer t = Tokenizer::learn_bpe(text, 100);
  const nlohmann::json j = t.to_json();
  CHECK(j.size() == 2);
  CHECK(j.at("kind") == "bpe");
  const Tokenizer from_json = Tokenizer::from_json(j, "tokenizer.json");
  CHECK(from_json == t);
  CHECK(from_json.encode(text) == t.encode(text));

  const std::string path = dir / "tokenizer.json";
  t.save(path);
  const Tokenizer loaded = Tokenizer::load(path);
  CHECK(loaded == t);
  CHECK(loaded.encode(text) == t.encode(text));
  // The same model as a SentencePiece file, as spm_train would have written it.
  const Tokenizer model = Tokenizer::from_sentencepiece_model(dir / "tokenizer.model");
  CHECK(model == t);
  CHECK(model.encode(text) == t.encode(text));
  CHECK(model.decode(model.encode(text)) == text);
  // tokenizer.json alone is the tokenizer.
  std::filesystem::remove(dir / "tokenizer.model");
  CHECK(Tokenizer::load(path) == t);
  // Copies share the model and stay equal.
  Tokenizer copy = t;
  CHECK(copy == t);
  copy = Tokenizer::learn(Tokenizer::Kind::words, text);
  CHECK_FALSE(copy == t);
}

TEST_CASE("tokenizer: bpe: a file that is not a SentencePiece model is refused in one line naming it") {
  TempDir dir("tapegrad_test_tokenizer_bpe");
  const auto refused = [&](const std::string& path, const std::string& message) {
    INFO(path);
    CHECK_THROWS_AS(Tokenizer::from_sentencepiece_model(path), IOError);
    CHECK_THROWS_WITH(Tokenizer::from_sentencepiece_model(path), Contains(path) && Contains(message));
    try {
      Tokenizer::from_sentencepiece_model(path);
    } catch (const IOError& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  refused(dir.file("text.model", "the cat sat on the mat\n"), ": not a SentencePiece model (");
  refused(dir.file("empty.model", ""), ": not a SentencePiece model (empty)");
  refused(dir.file("binary.model", std::string("\x08\x96\x01\xFF\xFE\x00\x01garbage", 14)),
          ": not a SentencePiece model (");
  refused(dir / "missing.model", ": cannot open: No such file or directory");
  refused(dir.path.string(), ": is a directory, not a file");

  // A real SentencePiece model whose <unk> is not id 0 (T5's layout: <pad> 0, </s> 1, <unk> 2).
  SentenceLines lines({"the cat sat on the mat\n", "the dog sat on the rug\n"});
  std::string bytes;
  const std::unordered_map<std::string, std::string> options = {
      {"model_type", "bpe"}, {"vocab_size", "20"}, {"pad_id", "0"}, {"eos_id", "1"}, {"unk_id", "2"},
      {"bos_id", "-1"},      {"minloglevel", "2"}};
  REQUIRE(sentencepiece::SentencePieceTrainer::Train(options, &lines, &bytes).ok());
  refused(dir.file("t5.model", bytes), ": the SentencePiece model's <unk> is id 2, where tapegrad needs it at id 0");

  // The same in tokenizer.json: the model must be base64 of a SentencePiece model, and nothing else is there.
  const Tokenizer t = Tokenizer::learn_bpe(bpe_text(), 100);
  const std::string model = t.to_json().at("model");
  const auto refused_json = [&](const nlohmann::json& j, const std::string& message) {
    INFO(j.dump());
    CHECK_THROWS_AS(Tokenizer::from_json(j, "run/tokenizer.json"), IOError);
    CHECK_THROWS_WITH(Tokenizer::from_json(j, "run/tokenizer.json"),
                      Contains("run/tokenizer.json") && Contains(message));
  };
  refused_json({{"kind", "bpe"}}, "'model' is missing");
  refused_json({{"kind", "bpe"}, {"model", 7}}, "'model' must be a string, got 7");
  refused_json({{"kind", "bpe"}, {"model", "not base64!"}}, "'model': base64: ");
  refused_json({{"kind", "bpe"}, {"model", "aGVsbG8gd29ybGQ="}}, "'model': not a SentencePiece model (");
  refused_json({{"kind", "bpe"}, {"model", model}, {"tokens", {"<unk>"}}}, "unknown key 'tokens' for a bpe tokenizer");
  refused_json({{"kind", "words"}, {"model", model}, {"tokens", {"<unk>"}}},
               "unknown key 'model' for a words tokenizer");
  CHECK_NOTHROW(Tokenizer::from_json({{"kind", "bpe"}, {"model", model}}, "run/tokenizer.json"));
}

TEST_CASE("tokenizer: bpe: a model made elsewhere with a normalisation table is read, and normalises with it") {
  // SentencePiece compiles the rules into the model (precompiled_charsmap), which the reader checks before
  // the library uses it (train/data/sentencepiece_model_check.h): a table SentencePiece made passes.
  TempDir dir("tapegrad_test_tokenizer_bpe");
  SentenceLines lines({"the cat sat on the mat\n", "a fine fish\n"});
  const std::string rules = dir.file("rules.tsv", "FB01\t66 69\n");  // the ligature "ﬁ" is "fi"
  std::string bytes;
  const std::unordered_map<std::string, std::string> options = {
      {"model_type", "unigram"}, {"vocab_size", "30"},     {"hard_vocab_limit", "false"},
      {"normalization_rule_tsv", rules}, {"minloglevel", "2"}};
  REQUIRE(sentencepiece::SentencePieceTrainer::Train(options, &lines, &bytes).ok());
  const Tokenizer t = Tokenizer::from_sentencepiece_model(dir.file("ligature.model", bytes));
  CHECK(t.decode(t.encode("a \xef\xac\x81ne fish")) == "a fine fish");
}

TEST_CASE("tokenizer: bpe: a vocab size the text cannot give is a ValueError naming the size") {
  const std::string text = bpe_text();
  // 35 distinct characters, a space, a tab and a newline among them, and <unk>.
  CHECK_THROWS_AS(Tokenizer::learn_bpe(text, 10), ValueError);
  CHECK_THROWS_WITH(Tokenizer::learn_bpe(text, 10, "corpus.txt"),
                    "vocab size 10 is below the 35 distinct characters of corpus.txt + 1 (<unk>): BPE starts from "
                    "every character, so at least 36");
  // SentencePiece's own words, which say how far the text can go.
  CHECK_THROWS_AS(Tokenizer::learn_bpe(text, 100000), ValueError);
  CHECK_THROWS_WITH(Tokenizer::learn_bpe(text, 100000, "corpus.txt"),
                    "vocab size 100000: more than the 218 tokens BPE can learn from corpus.txt (its characters, "
                    "<unk> and every merge its text has): at most 218");
  CHECK_THROWS_WITH(Tokenizer::learn_bpe(text, 219, "corpus.txt", "--vocab-size"), StartsWith("--vocab-size 219: more than"));
  CHECK_NOTHROW(Tokenizer::learn_bpe(text, 218));
  CHECK_THROWS_AS(Tokenizer::learn_bpe(text, int64_t{1} << 40), ValueError);
  CHECK_THROWS_AS(Tokenizer::learn_bpe("", 100), ValueError);
  CHECK_THROWS_WITH(Tokenizer::learn(Tokenizer::Kind::bpe, text),
                    "tokenizer 'bpe' is learnt with a vocabulary size (Tokenizer::learn_bpe)");
  // The smallest size is the characters and <unk>: nothing merged, every character still its own token.
  const int64_t smallest = Tokenizer::learn(Tokenizer::Kind::characters, text).vocab_size();
  const Tokenizer t = Tokenizer::learn_bpe(text, smallest);
  CHECK(t.decode(t.encode(text)) == text);
  CHECK_THROWS_AS(Tokenizer::learn_bpe(text, smallest - 1), ValueError);
}

namespace {

/// What a terminal shows of `ids` after `prompt`, streamed token by token: add()'s pieces, then finish().
/// Checks on the way that no add() past the prompt decoded more than 2 · kTail ids.
std::string streamed(const Tokenizer& t, const std::vector<int64_t>& prompt, const std::vector<int64_t>& ids) {
  StreamingDecoder stream(t, prompt);
  std::string shown;
  for (size_t i = 0; i < ids.size(); ++i) {
    shown += stream.add(ids[i]);
    if (i > 0) REQUIRE(stream.ids_decoded_last() <= 2 * StreamingDecoder::kTail);
  }
  return shown + stream.finish();
}

/// n ids drawn from [1, vocab_size) by a fixed linear congruential sequence.
std::vector<int64_t> some_ids(const Tokenizer& t, size_t n, uint64_t state) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    ids.push_back(1 + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(t.vocab_size() - 1)));
  }
  return ids;
}

}  // namespace

TEST_CASE("tokenizer: streamed text is decode's text, at a bounded cost per token, for every kind") {
  const Tokenizer tokenizers[] = {Tokenizer::learn(Tokenizer::Kind::characters, kText),
                                  Tokenizer::learn(Tokenizer::Kind::words, bpe_text()),
                                  Tokenizer::learn_bpe(bpe_text(), 100)};
  for (const Tokenizer& t : tokenizers) {
    INFO(tokenizer_kind_name(t.kind()));
    const std::vector<int64_t> prompt = some_ids(t, 40, 1), ids = some_ids(t, 2000, 2);
    std::vector<int64_t> all = prompt;
    all.insert(all.end(), ids.begin(), ids.end());
    CHECK(streamed(t, prompt, ids) == t.decode(all));
  }
}

TEST_CASE("tokenizer: a character whose bytes come in several pieces is streamed once whole, never as U+FFFD") {
  // A model made elsewhere with SentencePiece's byte fallback: 中 and 😀 are not pieces, so they are their
  // UTF-8 bytes, one piece each, which decode alone as U+FFFD.
  SentenceLines lines({"the cat sat on the mat\n", "a fine fish and a fat cat\n"});
  std::string bytes;
  const std::unordered_map<std::string, std::string> options = {
      {"model_type", "bpe"}, {"vocab_size", "300"}, {"byte_fallback", "true"}, {"minloglevel", "2"}};
  REQUIRE(sentencepiece::SentencePieceTrainer::Train(options, &lines, &bytes).ok());
  TempDir dir("tapegrad_test_tokenizer_stream");
  const Tokenizer t = Tokenizer::from_sentencepiece_model(dir.file("bytes.model", bytes));
  const std::string text = "the cat 中 sat 😀 on the mat";
  const std::vector<int64_t> ids = t.encode(text);
  REQUIRE(ids.size() > 12);  // the two characters' 7 bytes are 7 pieces
  StreamingDecoder stream(t, {ids[0]});
  std::string shown;
  for (size_t i = 1; i < ids.size(); ++i) {
    const std::string piece = stream.add(ids[i]);
    CHECK(piece.find("\xEF\xBF\xBD") == std::string::npos);
    shown += piece;
  }
  CHECK(shown + stream.finish() == t.decode(ids));
  CHECK(t.decode(ids) == text);
}
