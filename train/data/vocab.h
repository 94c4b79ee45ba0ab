#pragma once
// Vocab: the whitespace tokenizer of the seed's example 2.1 (str2idx / idx2str), with three reserved ids.
// A text is split on runs of ASCII whitespace (space, \t, \n, \v, \f, \r); every word is one token.
//   id 0 <pad>: fills a batch row past its sequence's end (the key padding mask marks it)
//   id 1 <unk>: any word the vocabulary has not seen
//   id 2 <cls>: optionally prepended to every sequence as the pooling position
// On disk it is vocab.txt: one token per line, line k (1-based) holding id k - 1. Reading accepts what
// editors make of it, as the TSV reader does: a UTF-8 byte order mark at the start is skipped and a '\r'
// before each '\n' (CRLF) is dropped. Every line must be one word of the tokenizer: non-empty valid UTF-8
// without whitespace or NUL bytes, and no word twice.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tapegrad {

/// The words of a text: its maximal runs of non-whitespace (ASCII whitespace only), in order.
std::vector<std::string> split_words(std::string_view text);

class Vocab {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kUnk = 1;
  static constexpr int64_t kCls = 2;
  static constexpr int64_t kReserved = 3;  // ids below this are the reserved tokens

  /// The spellings of the reserved tokens, indexed by id.
  static const std::vector<std::string>& reserved_tokens();

  /// A vocabulary of only the reserved tokens.
  Vocab();

  /// The reserved tokens, then every word of the texts in order of first appearance (deterministic).
  /// A word spelled like a reserved token ("<unk>") keeps the reserved id.
  static Vocab build(const std::vector<std::string>& texts);

  /// Ids of the text's words; a word not in the vocabulary is <unk> (1). An empty text gives no ids.
  std::vector<int64_t> encode(const std::string& text) const;
  /// The tokens of the ids joined by single spaces; an id out of range is a ValueError.
  std::string decode(const std::vector<int64_t>& ids) const;

  /// The id of a token, or <unk> (1) when the vocabulary does not have it.
  int64_t id(const std::string& token) const;
  /// True when the vocabulary has the token.
  bool contains(const std::string& token) const;
  /// The token of an id; an id out of range is a ValueError.
  const std::string& token(int64_t id) const;
  /// Number of tokens, reserved ones included (the embedding table's V).
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  /// All tokens, indexed by id.
  const std::vector<std::string>& tokens() const { return tokens_; }

  /// The text of vocab.txt: every token followed by '\n', in id order.
  std::string text() const;
  /// Writes vocab.txt (text()) atomically and durably (atomic_file.h); an unwritable file is an IOError.
  void save(const std::string& path) const;
  /// Parses the text of a vocab.txt (see above); an empty file, an empty or duplicated line, invalid UTF-8,
  /// a NUL byte, a token containing whitespace or reserved tokens not on lines 1..3 are IOErrors naming
  /// `name` (the file) and the line.
  static Vocab parse(std::string_view text, const std::string& name);
  /// Reads vocab.txt whole (a regular file or a pipe, read once; at most 256 MiB) and parses it.
  static Vocab load(const std::string& path);

  friend bool operator==(const Vocab& a, const Vocab& b) { return a.tokens_ == b.tokens_; }

 private:
  /// Appends a token that is not yet present; returns its id.
  int64_t add(const std::string& token);

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace tapegrad
