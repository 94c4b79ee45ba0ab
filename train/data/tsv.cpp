#include "train/data/tsv.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/error.h"
#include "autograd/random.h"
#include "train/io/read_file.h"
#include "train/io/text_lines.h"

namespace tapegrad {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

bool blank(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

}  // namespace

LabelledData parse_tsv(std::string_view text, const std::string& path) {
  LabelledData data;
  const int64_t lines = for_each_line(text, path, [&](int64_t number, std::string_view line) {
    const auto where = [&] { return cat(path, ":", number, ": "); };
    if (blank(line)) return;
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) throw IOError(cat(where(), "no tab: expected label<TAB>text"));
    Example example{std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))};
    if (example.label.empty()) throw IOError(cat(where(), "empty label"));
    if (is_space(example.label.front()) || is_space(example.label.back()))
      throw IOError(cat(where(), "label '", example.label, "' has leading or trailing whitespace"));
    if (blank(example.text)) throw IOError(cat(where(), "empty text (label '", example.label, "')"));
    data.examples.push_back(std::move(example));
  });
  if (data.examples.empty())
    throw IOError(cat(path, ": empty file: no label<TAB>text lines (", lines, " blank lines)"));
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
