#include "train/data/tokenizer.h"

#include <utf8.h>

#include <algorithm>
#include <set>
#include <utility>

#include "autograd/error.h"
#include "train/data/vocab.h"
#include "train/io/atomic_file.h"
#include "train/io/read_file.h"
#include "train/io/strict_json.h"
#include "train/io/text_lines.h"

namespace tapegrad {

namespace {

constexpr const char* kUnkToken = "<unk>";

/// tokenizer.json holds one token a vocabulary entry: a few MB even for a large word list.
constexpr FileLimit kTokenizerLimit{"a tokenizer file", uint64_t{64} << 20};

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

}  // namespace

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

Tokenizer::Tokenizer(Kind kind, std::vector<std::string> tokens) : kind_(kind), tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int64_t>(i));
}

Tokenizer Tokenizer::learn(Kind kind, std::string_view text, const std::string& what) {
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

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  if (const size_t bad = find_invalid_utf8(text); bad != text.size())
    throw ValueError(cat("tokenizer: invalid UTF-8 at byte ", bad + 1, " of the text"));
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
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (kind_ == Kind::words && i > 0) out += ' ';
    out += token(ids[i]);
  }
  return out;
}

nlohmann::json Tokenizer::to_json() const { return {{"kind", tokenizer_kind_name(kind_)}, {"tokens", tokens_}}; }

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& path) {
  JsonFields fields(j, path);
  Kind kind;
  try {
    kind = tokenizer_kind(fields.string("kind"));
  } catch (const ValueError& e) {
    throw IOError(cat(path, ": 'kind': ", e.what()));
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
      throw IOError(cat(path, ": 'tokens'[", i, "] must be one character, got \"", token, "\""));
    if (i > 0 && kind == Kind::words && split_words(token) != std::vector<std::string>{token})
      throw IOError(cat(path, ": 'tokens'[", i, "] must be one word without whitespace, got \"", token, "\""));
    if (!seen.insert(token).second) throw IOError(cat(path, ": 'tokens'[", i, "] \"", token, "\" appears twice"));
    tokens.push_back(std::move(token));
  }
  // Anything but the two keys is a misspelling or another program's file.
  for (const auto& [key, value] : j.items())
    if (key != "kind" && key != "tokens") throw IOError(cat(path, ": unknown key '", key, "'"));
  return Tokenizer(kind, std::move(tokens));
}

void Tokenizer::save(const std::string& path) const { write_file_atomic(path, to_json().dump(1) + "\n"); }

Tokenizer Tokenizer::load(const std::string& path) {
  return from_json(parse_json_strictly(read_whole_file(path, kTokenizerLimit), path, 2), path);
}

const char* tokenizer_kind_name(Tokenizer::Kind kind) {
  return kind == Tokenizer::Kind::characters ? "characters" : "words";
}

Tokenizer::Kind tokenizer_kind(const std::string& name) {
  if (name == "characters") return Tokenizer::Kind::characters;
  if (name == "words") return Tokenizer::Kind::words;
  throw ValueError(cat("unknown tokenizer '", name, "' (known: characters or words)"));
}

}  // namespace tapegrad
