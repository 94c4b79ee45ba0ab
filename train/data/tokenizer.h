#pragma once
// How a language model's text becomes token ids and back. A tokenizer is learnt from the training text and
// kept in the run directory (tokenizer.json), so that generating, evaluating and resuming need nothing else.
//   characters: every UTF-8 code point is a token, newlines and spaces included, so decode(encode(t)) == t
//               for every text whose characters the training text has;
//   words:      the runs of non-whitespace (split_words, vocab.h); decode joins them with single spaces.
// Id 0 is <unk>: a character or word the training text did not have. The others follow in a fixed order
// (characters by code point, words by first appearance), so the same text always gives the same ids.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace tapegrad {

/// A language model's text as read: refused, as an IOError naming `path` and the line, when it is empty
/// or whitespace only, holds a NUL byte (a binary file) or is not valid UTF-8.
void check_corpus_text(std::string_view text, const std::string& path);

class Tokenizer {
 public:
  enum class Kind { characters, words };
  static constexpr int64_t kUnk = 0;

  /// The tokens of `text` (check_corpus_text's rules hold; a ValueError otherwise, naming `what`).
  static Tokenizer learn(Kind kind, std::string_view text, const std::string& what = "the training text");

  /// The ids of the text's tokens; a token the tokenizer does not have is <unk>.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The text of the ids (characters: concatenated; words: joined by spaces); <unk> reads "<unk>". An id
  /// out of [0, vocab_size) is a ValueError.
  std::string decode(std::span<const int64_t> ids) const;
  /// The text of one id, as decode gives it (without a word's separating space).
  const std::string& token(int64_t id) const;

  Kind kind() const { return kind_; }
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }

  /// {"kind": "characters" | "words", "tokens": [...]} (tokens in id order, <unk> first).
  nlohmann::json to_json() const;
  /// The inverse of to_json, read strictly: another kind, a token list that does not start with <unk>, an
  /// empty or repeated token, or (characters) a token that is not exactly one code point, is an IOError
  /// naming `path`.
  static Tokenizer from_json(const nlohmann::json& j, const std::string& path);
  /// tokenizer.json, written atomically and durably (atomic_file.h).
  void save(const std::string& path) const;
  static Tokenizer load(const std::string& path);

  friend bool operator==(const Tokenizer& a, const Tokenizer& b) { return a.kind_ == b.kind_ && a.tokens_ == b.tokens_; }

 private:
  Tokenizer(Kind kind, std::vector<std::string> tokens);
  Kind kind_;
  std::vector<std::string> tokens_;  // by id
  std::unordered_map<std::string, int64_t> ids_;
};

/// "characters" or "words"; the inverse is a ValueError listing both for another name.
const char* tokenizer_kind_name(Tokenizer::Kind kind);
Tokenizer::Kind tokenizer_kind(const std::string& name);

}  // namespace tapegrad
