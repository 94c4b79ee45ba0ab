#include "train/data/vocab.h"

#include "autograd/error.h"
#include "train/io/atomic_file.h"
#include "train/io/read_file.h"
#include "train/io/text_lines.h"

namespace tapegrad {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

const std::vector<std::string>& Vocab::reserved_tokens() {
  static const std::vector<std::string> reserved = {"<pad>", "<unk>", "<cls>"};
  return reserved;
}

Vocab::Vocab() {
  for (const std::string& token : reserved_tokens()) add(token);
}

int64_t Vocab::add(const std::string& token) {
  const int64_t next = size();
  tokens_.push_back(token);
  ids_.emplace(token, next);
  return next;
}

Vocab Vocab::build(const std::vector<std::string>& texts) {
  Vocab vocab;
  for (const std::string& text : texts)
    for (std::string& word : split_words(text))
      if (!vocab.contains(word)) vocab.add(word);
  return vocab;
}

std::vector<int64_t> Vocab::encode(const std::string& text) const {
  std::vector<int64_t> out;
  for (const std::string& word : split_words(text)) out.push_back(id(word));
  return out;
}

std::string Vocab::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += token(ids[i]);
  }
  return out;
}

int64_t Vocab::id(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? kUnk : it->second;
}

bool Vocab::contains(const std::string& token) const { return ids_.count(token) != 0; }

const std::string& Vocab::token(int64_t id) const {
  if (id < 0 || id >= size()) throw ValueError(cat("vocab: id ", id, " out of range [0, ", size(), ")"));
  return tokens_[static_cast<size_t>(id)];
}

std::string Vocab::text() const {
  std::string out;
  for (const std::string& t : tokens_) out.append(t).push_back('\n');
  return out;
}

void Vocab::save(const std::string& path) const { write_file_atomic(path, text()); }

Vocab Vocab::parse(std::string_view text, const std::string& path) {
  if (text.empty() || text == "\xef\xbb\xbf")
    throw IOError(cat(path, ": empty file (a vocabulary starts with <pad>, <unk>, <cls>)"));
  Vocab vocab;
  vocab.tokens_.clear();
  vocab.ids_.clear();
  const std::vector<std::string>& reserved = reserved_tokens();
  const int64_t lines = for_each_line(text, path, [&](int64_t number, std::string_view line) {
    const auto where = [&] { return cat(path, ":", number, ": "); };
    const int64_t id = number - 1;
    if (line.empty()) throw IOError(cat(where(), "empty line (every line is one token)"));
    const std::string token(line);
    for (char c : token)
      if (is_space(c)) throw IOError(cat(where(), "token '", token, "' contains whitespace"));
    if (id < kReserved && token != reserved[id])
      throw IOError(cat(where(), "expected the reserved token ", reserved[id], ", found ", in_quotes(token)));
    const auto seen = vocab.ids_.find(token);
    if (seen != vocab.ids_.end())
      throw IOError(cat(where(), "duplicate token '", token, "' (first on line ", seen->second + 1, ")"));
    vocab.add(token);
  });
  if (vocab.size() < kReserved)
    throw IOError(cat(path, ":", lines + 1, ": missing the reserved token ", reserved[vocab.size()],
                      " (the file must start with <pad>, <unk>, <cls>)"));
  return vocab;
}

Vocab Vocab::load(const std::string& path) { return parse(read_whole_file(path, kTokenListLimit), path); }

}  // namespace tapegrad
