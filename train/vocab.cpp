#include "train/vocab.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/error.h"

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

void Vocab::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IOError(cat(path, ": cannot open for writing: ", std::strerror(errno)));
  for (const std::string& t : tokens_) out << t << '\n';
  out.flush();
  if (!out) throw IOError(cat(path, ": write failed: ", std::strerror(errno)));
}

Vocab Vocab::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw IOError(cat(path, ": cannot open: is a directory"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(cat(path, ": cannot open: ", std::strerror(errno)));
  Vocab vocab;
  vocab.tokens_.clear();
  vocab.ids_.clear();
  const std::vector<std::string>& reserved = reserved_tokens();
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const int64_t id = line_number - 1;
    if (line.empty()) throw IOError(cat(path, ":", line_number, ": empty line (every line is one token)"));
    for (char c : line)
      if (is_space(c)) throw IOError(cat(path, ":", line_number, ": token '", line, "' contains whitespace"));
    if (id < kReserved && line != reserved[id])
      throw IOError(
          cat(path, ":", line_number, ": expected the reserved token ", reserved[id], ", found '", line, "'"));
    const auto seen = vocab.ids_.find(line);
    if (seen != vocab.ids_.end())
      throw IOError(
          cat(path, ":", line_number, ": duplicate token '", line, "' (first on line ", seen->second + 1, ")"));
    vocab.add(line);
  }
  if (in.bad()) throw IOError(cat(path, ": read failed: ", std::strerror(errno)));
  if (vocab.size() < kReserved)
    throw IOError(cat(path, ":", line_number + 1, ": missing the reserved token ", reserved[vocab.size()],
                      " (the file must start with <pad>, <unk>, <cls>)"));
  return vocab;
}

}  // namespace tapegrad
