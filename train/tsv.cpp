#include "train/tsv.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/error.h"
#include "autograd/random.h"
#include "train/read_file.h"

namespace tapegrad {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

bool blank(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte: the sequence length and the allowed range of the second byte (which excludes overlong
    // forms, UTF-16 surrogates D800..DFFF and code points above 10FFFF); later bytes are 80..BF.
    size_t length;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      length = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;  // a continuation byte without a lead, C0/C1 (overlong) or F5..FF
    }
    if (i + length > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < length; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    i += length;
  }
  return n;
}

LabelledData parse_tsv(std::string_view text, const std::string& path) {
  if (text.substr(0, 3) == "\xef\xbb\xbf") text.remove_prefix(3);
  LabelledData data;
  int64_t line_number = 0;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto where = [&] { return cat(path, ":", line_number, ": "); };
    const size_t bad = find_invalid_utf8(line);
    if (bad != line.size()) throw IOError(cat(where(), "invalid UTF-8 at byte ", bad + 1, " of the line"));
    if (const size_t nul = line.find('\0'); nul != std::string_view::npos)
      throw IOError(cat(where(), "NUL byte at byte ", nul + 1, " of the line (a binary file?)"));
    if (blank(line)) continue;
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) throw IOError(cat(where(), "no tab: expected label<TAB>text"));
    Example example{std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))};
    if (example.label.empty()) throw IOError(cat(where(), "empty label"));
    if (is_space(example.label.front()) || is_space(example.label.back()))
      throw IOError(cat(where(), "label '", example.label, "' has leading or trailing whitespace"));
    if (blank(example.text)) throw IOError(cat(where(), "empty text (label '", example.label, "')"));
    data.examples.push_back(std::move(example));
  }
  if (data.examples.empty())
    throw IOError(cat(path, ": empty file: no label<TAB>text lines (", line_number, " blank lines)"));
  return data;
}

LabelledData read_tsv(const std::string& path) { return parse_tsv(read_whole_file(path, kTsvLimit), path); }

std::vector<std::string> sorted_labels(const std::vector<Example>& examples) {
  std::set<std::string> labels;
  for (const Example& e : examples) labels.insert(e.label);
  return {labels.begin(), labels.end()};
}

Split split(const std::vector<Example>& examples, double valid_fraction, uint64_t seed) {
  if (!(valid_fraction >= 0 && valid_fraction < 1))
    throw ValueError(cat("split: valid_fraction = ", valid_fraction, " is outside [0, 1)"));
  const size_t n = examples.size();
  size_t n_valid = static_cast<size_t>(std::llround(valid_fraction * static_cast<double>(n)));
  if (valid_fraction > 0 && n >= 2) n_valid = std::clamp<size_t>(n_valid, 1, n - 1);
  n_valid = std::min(n_valid, n);

  // A partial Fisher-Yates shuffle: its first n_valid slots are a uniform random subset.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  Generator gen(seed);
  for (size_t i = 0; i < n_valid; ++i) std::swap(order[i], order[i + gen.below(n - i)]);
  std::vector<bool> is_valid(n, false);
  for (size_t i = 0; i < n_valid; ++i) is_valid[order[i]] = true;

  Split out;
  for (size_t i = 0; i < n; ++i) (is_valid[i] ? out.valid : out.train).push_back(examples[i]);
  return out;
}

}  // namespace tapegrad
