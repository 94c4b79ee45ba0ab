#include "train/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <utf8.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "autograd/error.h"
#include "train/data/sentencepiece_model_check.h"
#include "train/data/sentencepiece_reason.h"
#include "train/data/vocab.h"
#include "train/io/atomic_file.h"
#include "train/io/base64.h"
#include "train/io/fingerprint.h"
#include "train/io/read_file.h"
#include "train/io/strict_json.h"
#include "train/io/text_lines.h"

namespace tapegrad {

namespace {

/// tokenizer.json holds one token a vocabulary entry: a few MB even for a large word list. A bpe one holds
/// its SentencePiece model in base64, 4/3 of the model's size, so it takes any model the limit below takes.
constexpr FileLimit kTokenizerLimit{"a tokenizer file", uint64_t{64} << 20};
/// A SentencePiece model is its pieces and their scores: about 400 KB for 32k pieces, 5 MB for 256k.
constexpr FileLimit kSentencePieceModelLimit{"a SentencePiece model", uint64_t{32} << 20};

/// The name bpe's SentencePiece model is saved under, beside tokenizer.json.
constexpr const char* kSentencePieceModelName = "tokenizer.model";


/// The names of the kinds, in the enum's order: the one table both directions read.
constexpr std::array<const char*, 3> kKindNames = {"characters", "words", "bpe"};

/// The line (from 1) and the byte within it of offset `at` in text.
std::pair<int64_t, size_t> line_of(std::string_view text, size_t at) {
  const std::string_view before = text.substr(0, at);
  const size_t line_start = before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
  return {static_cast<int64_t>(std::count(before.begin(), before.end(), '\n')) + 1, at - line_start + 1};
}

/// The code points of valid UTF-8 text, each as its own UTF-8 string.
std::vector<std::string> characters_of(std::string_view text) {
  std::vector<std::string> out;
  auto it = text.begin();
  while (it != text.end()) {
    const auto start = it;
    utf8::unchecked::next(it);
    out.emplace_back(start, it);
  }
  return out;
}

/// The code point of a one-character UTF-8 string, and as 4 or more hex digits.
char32_t code_point(const std::string& character) {
  auto it = character.begin();
  return utf8::unchecked::next(it);
}
std::string code_point_hex(const std::string& character) {
  char text[16];
  std::snprintf(text, sizeof text, "%04X", static_cast<unsigned>(code_point(character)));
  return text;
}

/// A token as a message shows it: a JSON string, so that "\n" or a quote stays on the message's one line.
std::string shown(const std::string& token) { return nlohmann::json(token).dump(); }

}  // namespace

/// What SentencePiece says went wrong, without the source file and the failed condition it puts first
/// ("./src/trainer_interface.cc(660) [...] "), which tell a user nothing; `otherwise` when nothing else is left.
std::string sentencepiece_reason(const sentencepiece::util::Status& status, const char* otherwise) {
  std::string message = status.error_message();
  const size_t source = message.find(".cc(");
  if (source != std::string::npos && source < message.find(' ')) {
    const size_t end = message.find("] ");
    message.erase(0, end == std::string::npos ? message.size() : end + 2);
  }
  while (!message.empty() && (message.back() == ' ' || message.back() == '.')) message.pop_back();
  return message.empty() ? otherwise : message;
}

void check_corpus_text(std::string_view text, const std::string& path) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const auto [line, byte] = line_of(text, nul);
    throw IOError(cat(path, ":", line, ": a NUL byte at byte ", byte, " of the line: this is not a text file"));
  }
  if (const size_t bad = find_invalid_utf8(text); bad != text.size()) {
    const auto [line, byte] = line_of(text, bad);
    throw IOError(cat(path, ":", line, ": invalid UTF-8 at byte ", byte, " of the line"));
  }
  if (split_words(text).empty())
    throw IOError(cat(path, ": ", text.empty() ? "empty" : "whitespace only", ": a language model needs text"));
}

// The bytes of a SentencePiece model and the processor loaded from them; the bytes are kept as given, so
// that tokenizer.model, tokenizer.json and equality all see exactly what was learnt or read.
struct Tokenizer::SentencePiece {
  std::string bytes;
  sentencepiece::SentencePieceProcessor processor;
};

Tokenizer::Tokenizer(Kind kind, std::vector<std::string> tokens) : kind_(kind), tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int64_t>(i));
}

Tokenizer::Tokenizer(std::shared_ptr<const SentencePiece> model) : kind_(Kind::bpe), model_(std::move(model)) {
  // Each id's text as decode gives it alone: " the" for "▁the", "" for a control piece (<s>, </s>).
  const int n = model_->processor.GetPieceSize();
  tokens_.reserve(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    std::string text;
    if (const auto status = model_->processor.Decode(std::vector<int>{id}, &text); !status.ok())
      throw IOError(cat("tokenizer: SentencePiece cannot decode its own id ", id, " (",
                        sentencepiece_reason(status, "no reason given"), ")"));
    tokens_.push_back(std::move(text));
  }
}

Tokenizer Tokenizer::learn(Kind kind, std::string_view text, const std::string& what) {
  if (kind == Kind::bpe) throw ValueError("tokenizer 'bpe' is learnt with a vocabulary size (Tokenizer::learn_bpe)");
  try {
    check_corpus_text(text, what);
  } catch (const IOError& e) {
    throw ValueError(e.what());
  }
  std::vector<std::string> tokens = {kUnkToken};
  if (kind == Kind::characters) {
    std::set<char32_t> code_points;
    for (auto it = text.begin(); it != text.end();) code_points.insert(utf8::unchecked::next(it));
    for (const char32_t c : code_points) {
      std::string token;
      utf8::unchecked::append(c, std::back_inserter(token));
      tokens.push_back(std::move(token));
    }
  } else {
    std::set<std::string> seen = {kUnkToken};
    for (const std::string& word : split_words(text))
      if (seen.insert(word).second) tokens.push_back(word);
  }
  return Tokenizer(kind, std::move(tokens));
}

Tokenizer Tokenizer::from_sentencepiece_model(const std::string& path) {
  return from_sentencepiece_bytes(read_whole_file(path, kSentencePieceModelLimit), path);
}

Tokenizer Tokenizer::from_sentencepiece_bytes(std::string bytes, const std::string& source) {
  check_sentencepiece_model_bytes(bytes, source);  // empty, or what the library would use unchecked
  auto model = std::make_shared<SentencePiece>();
  model->bytes = std::move(bytes);
  sentencepiece::util::Status status;
  try {  // the library returns its own errors, but lets its trie builder's (Darts-clone's) throw
    status = model->processor.LoadFromSerializedProto(model->bytes);
  } catch (const std::exception& e) {
    const std::string_view what = e.what(), after = "exception: ";  // "./darts.h:1143: exception: <what>"
    const size_t at = what.find(after);
    throw IOError(cat(source, ": not a SentencePiece model (",
                      at == what.npos ? what : what.substr(at + after.size()), ")"));
  }
  if (!status.ok())
    throw IOError(cat(source, ": not a SentencePiece model (",
                      sentencepiece_reason(status, "the bytes are not a SentencePiece model protobuf"), ")"));
  // <unk> at 0 is what kUnk promises of every tokenizer; SentencePiece's trainer puts it there by default.
  if (const int unk = model->processor.unk_id(); unk != kUnk)
    throw IOError(cat(source, ": the SentencePiece model's <unk> is id ", unk, ", where tapegrad needs it at id ", kUnk,
                      " (spm_train --unk_id=0)"));
  return Tokenizer(std::shared_ptr<const SentencePiece>(std::move(model)));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  if (const size_t bad = find_invalid_utf8(text); bad != text.size())
    throw ValueError(cat("tokenizer: invalid UTF-8 at byte ", bad + 1, " of the text"));
  if (kind_ == Kind::bpe) {
    std::vector<int> pieces;
    if (const auto status = model_->processor.Encode(text, &pieces); !status.ok())
      throw ValueError(cat("tokenizer: SentencePiece cannot encode the text (",
                           sentencepiece_reason(status, "no reason given"), ")"));
    return {pieces.begin(), pieces.end()};
  }
  const std::vector<std::string> pieces = kind_ == Kind::characters ? characters_of(text) : split_words(text);
  std::vector<int64_t> ids;
  ids.reserve(pieces.size());
  for (const std::string& piece : pieces) {
    const auto it = ids_.find(piece);
    ids.push_back(it == ids_.end() ? kUnk : it->second);
  }
  return ids;
}

const std::string& Tokenizer::token(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw ValueError(cat("tokenizer: id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
  return tokens_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(std::span<const int64_t> ids) const {
  if (kind_ == Kind::bpe) {
    // SentencePiece's decode, not the tokens concatenated: a model made elsewhere may drop the space it
    // adds before a text, or join byte pieces into one character.
    std::vector<int> pieces;
    pieces.reserve(ids.size());
    for (const int64_t id : ids) {
      token(id);  // the range check and its message
      pieces.push_back(static_cast<int>(id));
    }
    std::string out;
    if (const auto status = model_->processor.Decode(pieces, &out); !status.ok())
      throw ValueError(cat("tokenizer: SentencePiece cannot decode the ids (",
                           sentencepiece_reason(status, "no reason given"), ")"));
    return out;
  }
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (kind_ == Kind::words && i > 0) out += ' ';
    out += token(ids[i]);
  }
  return out;
}

nlohmann::json Tokenizer::to_json() const {
  if (kind_ == Kind::bpe) return {{"kind", tokenizer_kind_name(kind_)}, {"model", base64_encode(model_->bytes)}};
  return {{"kind", tokenizer_kind_name(kind_)}, {"tokens", tokens_}};
}

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& path) {
  JsonFields fields(j, path);
  Kind kind;
  try {
    kind = tokenizer_kind(fields.string("kind"));
  } catch (const ValueError& e) {
    throw IOError(cat(path, ": 'kind': ", e.what()));
  }
  // Anything but the kind's own keys is a misspelling, another kind's key or another program's file.
  const auto refuse_other_keys = [&](const char* own) {
    for (const auto& [key, value] : j.items())
      if (key != "kind" && key != own)
        throw IOError(cat(path, ": unknown key ", in_quotes(key), " for a ", tokenizer_kind_name(kind), " tokenizer"));
  };
  if (kind == Kind::bpe) {
    const std::string encoded = fields.string("model");
    refuse_other_keys("model");
    std::string bytes;
    try {
      bytes = base64_decode(encoded);
    } catch (const ValueError& e) {
      throw IOError(cat(path, ": 'model': ", e.what()));
    }
    return from_sentencepiece_bytes(std::move(bytes), cat(path, ": 'model'"));
  }
  const nlohmann::json& list = fields.has("tokens") ? j.at("tokens") : nlohmann::json();
  if (!list.is_array() || list.empty()) throw IOError(cat(path, ": 'tokens' must be a non-empty list of strings"));
  std::vector<std::string> tokens;
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) throw IOError(cat(path, ": 'tokens'[", i, "] must be a string"));
    std::string token = list[i].get<std::string>();
    if (i == 0 && token != kUnkToken) throw IOError(cat(path, ": 'tokens'[0] must be \"", kUnkToken, "\""));
    if (token.empty() || find_invalid_utf8(token) != token.size() || token.find('\0') != std::string::npos)
      throw IOError(cat(path, ": 'tokens'[", i, "] must be non-empty UTF-8 without NUL bytes"));
    if (i > 0 && kind == Kind::characters && characters_of(token).size() != 1)
      throw IOError(cat(path, ": 'tokens'[", i, "] must be one character, got ", shown(token)));
    // learn numbers the characters by code point: ids out of that order are not a tokenizer learn made (two
    // swapped entries would read every text with the two characters exchanged).
    // (equal code points are "appears twice", below)
    if (i > 1 && kind == Kind::characters && code_point(token) < code_point(tokens.back()))
      throw IOError(cat(path, ": 'tokens'[", i, "] ", shown(token), " (U+", code_point_hex(token), ") comes after ",
                        shown(tokens.back()), " (U+", code_point_hex(tokens.back()),
                        "): a characters tokenizer lists its characters in code-point order"));
    if (i > 0 && kind == Kind::words && split_words(token) != std::vector<std::string>{token})
      throw IOError(cat(path, ": 'tokens'[", i, "] must be one word without whitespace, got ", shown(token)));
    if (!seen.insert(token).second) throw IOError(cat(path, ": 'tokens'[", i, "] ", shown(token), " appears twice"));
    tokens.push_back(std::move(token));
  }
  refuse_other_keys("tokens");
  return Tokenizer(kind, std::move(tokens));
}

void Tokenizer::save(const std::string& path) const {
  if (kind_ == Kind::bpe) {
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    write_file_atomic((folder / kSentencePieceModelName).string(), model_->bytes);
  }
  write_file_atomic(path, to_json().dump(1) + "\n");
}

Tokenizer Tokenizer::load(const std::string& path) {
  return from_json(parse_json_strictly(read_whole_file(path, kTokenizerLimit), path, 2), path);
}

std::string Tokenizer::digest() const {
  Fingerprint hash;
  hash.mix(tokenizer_kind_name(kind_), '\n');
  if (kind_ == Kind::bpe) {
    hash.mix(model_->bytes, '\n');
  } else {
    for (const std::string& token : tokens_) hash.mix(token, '\0');  // no token holds a NUL byte
  }
  return hash.hex();
}

bool operator==(const Tokenizer& a, const Tokenizer& b) {
  if (a.kind_ != b.kind_) return false;
  if (a.kind_ == Tokenizer::Kind::bpe) return a.model_->bytes == b.model_->bytes;
  return a.tokens_ == b.tokens_;
}

const char* tokenizer_kind_name(Tokenizer::Kind kind) { return kKindNames.at(static_cast<size_t>(kind)); }

Tokenizer::Kind tokenizer_kind(const std::string& name) {
  std::string known;
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (name == kKindNames[i]) return static_cast<Tokenizer::Kind>(i);
    known += cat(i == 0 ? "" : i + 1 == kKindNames.size() ? " or " : ", ", kKindNames[i]);
  }
  throw ValueError(cat("unknown tokenizer ", in_quotes(name), " (known: ", known, ")"));
}

}  // namespace tapegrad
