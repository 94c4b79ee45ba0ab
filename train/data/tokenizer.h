#pragma once
// How a language model's text becomes token ids and back. A tokenizer is learnt from the training text and
// kept in the run directory (tokenizer.json), so that generating, evaluating and resuming need nothing else.
//   characters: every UTF-8 code point is a token, newlines and spaces included, so decode(encode(t)) == t
//               for every text whose characters the training text has;
//   words:      the runs of non-whitespace (split_words, vocab.h); decode joins them with single spaces.
//   bpe:        subwords through SentencePiece (Debian's libsentencepiece): learn_bpe merges the training
//               text's most frequent pairs, from its characters up to the vocabulary size asked for; or any
//               SentencePiece model (BPE or unigram) made elsewhere, from_sentencepiece_model. A learnt one
//               decodes every text whose characters the training text has back to itself, newlines, tabs
//               and runs of spaces included, with one exception: U+2581 '▁', SentencePiece's own sign for
//               a space, reads back as a space.
// Id 0 is <unk>: a character or word the training text did not have (bpe: a run of such characters). The
// others follow in a fixed order (characters by code point, words by first appearance, subwords as
// SentencePiece numbers them), so the same text always gives the same ids.
#include <cstdint>
#include <memory>
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
  enum class Kind { characters, words, bpe };
  static constexpr int64_t kUnk = 0;
  static constexpr const char* kUnkToken = "<unk>";  // <unk>'s text

  /// The tokens of `text` (check_corpus_text's rules hold; a ValueError otherwise, naming `what`), for
  /// characters or words; bpe needs a vocabulary size (learn_bpe).
  static Tokenizer learn(Kind kind, std::string_view text, const std::string& what = "the training text");
  /// A SentencePiece BPE model of exactly vocab_size tokens learnt from `text` (check_corpus_text's rules
  /// hold), the same model for the same text. A ValueError naming `what` and the size (as `size_name`, the
  /// setting a user gives it by: "--vocab-size") when the size is below the text's distinct characters + 1
  /// (<unk>), or above what its merges can reach.
  static Tokenizer learn_bpe(std::string_view text, int64_t vocab_size, const std::string& what = "the training text",
                             const std::string& size_name = "vocab size");
  /// An existing SentencePiece model file (as spm_train or the Python package writes it), BPE or unigram,
  /// whose <unk> is id 0 as here. An IOError naming `path` when it cannot be read, is not a SentencePiece
  /// model or numbers <unk> otherwise.
  static Tokenizer from_sentencepiece_model(const std::string& path);

  /// The ids of the text's tokens; a token the tokenizer does not have is <unk>.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The text of the ids (characters, bpe: concatenated; words: joined by spaces); <unk> reads "<unk>" (a
  /// SentencePiece model made elsewhere: its own unk_surface, " ⁇ " by default). An id out of
  /// [0, vocab_size) is a ValueError.
  std::string decode(std::span<const int64_t> ids) const;
  /// The text of one id, as decode gives it alone (without a word's separating space; a subword with its
  /// spaces, " the"), so that a learnt tokenizer's tokens, concatenated, are decode's text.
  const std::string& token(int64_t id) const;

  Kind kind() const { return kind_; }
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }

  /// {"kind": "characters" | "words", "tokens": [...]} (tokens in id order, <unk> first), or
  /// {"kind": "bpe", "model": "<base64 of the SentencePiece model's bytes>"}: the whole model, so that the
  /// run directory needs no other file.
  nlohmann::json to_json() const;
  /// The inverse of to_json, read strictly: another kind, a token list that does not start with <unk>, an
  /// empty or repeated token, (characters) a token that is not exactly one code point or out of code-point
  /// order (the order learn gives them), (words) a token with whitespace, (bpe) a model that is not base64 or
  /// not a SentencePiece model, or a key of another kind, is an IOError naming `path`.
  static Tokenizer from_json(const nlohmann::json& j, const std::string& path);
  /// tokenizer.json, written atomically and durably (atomic_file.h); bpe also writes its model, the same
  /// bytes, as tokenizer.model in the same folder (first, so that a new tokenizer.json always has its own
  /// model beside it), for the sentencepiece Python package or spm_encode. load reads tokenizer.json alone.
  void save(const std::string& path) const;
  static Tokenizer load(const std::string& path);

  /// A fingerprint of the kind and every token in id order (bpe: the model's bytes), train/io/fingerprint.h:
  /// config.json records it beside the weights trained with this tokenizer, and every reader of the
  /// checkpoint compares it with the tokenizer.json it finds (load_language_model).
  std::string digest() const;

  /// The same kind and tokens; bpe: the same model bytes.
  friend bool operator==(const Tokenizer& a, const Tokenizer& b);

 private:
  struct SentencePiece;  // the model's bytes and its processor (tokenizer.cpp): no SentencePiece header here
  Tokenizer(Kind kind, std::vector<std::string> tokens);
  explicit Tokenizer(std::shared_ptr<const SentencePiece> model);
  /// bytes as a loaded SentencePiece model, or an IOError "<source>: not a SentencePiece model (...)".
  static Tokenizer from_sentencepiece_bytes(std::string bytes, const std::string& source);

  Kind kind_;
  std::vector<std::string> tokens_;  // by id
  std::unordered_map<std::string, int64_t> ids_;  // characters and words
  // bpe. Shared, never changed: the processor cannot be copied, and copies of a tokenizer may share it.
  std::shared_ptr<const SentencePiece> model_;
};

/// "characters", "words" or "bpe"; the inverse is a ValueError listing them for another name.
const char* tokenizer_kind_name(Tokenizer::Kind kind);
Tokenizer::Kind tokenizer_kind(const std::string& name);

}  // namespace tapegrad
