#include "train/report/confusion.h"

#include <algorithm>
#include <cstdio>

#include "autograd/error.h"

namespace tapegrad {

Confusion::Confusion(int64_t classes) : classes_(classes) {
  if (classes < 0) throw ValueError(cat("Confusion: ", classes, " classes"));
}

void Confusion::add(int64_t truth, int64_t predicted) {
  if (truth < 0 || truth >= classes_ || predicted < 0 || predicted >= classes_)
    throw ValueError(cat("Confusion::add: classes (", truth, ", ", predicted, ") outside [0, ", classes_, ")"));
  ++cells_[{truth, predicted}];
}

int64_t Confusion::at(int64_t truth, int64_t predicted) const {
  const auto it = cells_.find({truth, predicted});
  return it == cells_.end() ? 0 : it->second;
}

std::vector<std::vector<int64_t>> Confusion::dense() const {
  if (classes_ > kConfusionDenseClasses)
    throw ValueError(cat("Confusion::dense: ", classes_, " classes is more than the ", kConfusionDenseClasses,
                         " a dense table is made for"));
  std::vector<std::vector<int64_t>> table(static_cast<size_t>(classes_), std::vector<int64_t>(classes_, 0));
  for (const auto& [cell, n] : cells_) table[cell.first][cell.second] = n;
  return table;
}

namespace {

/// Code points in UTF-8 text: every byte that is not a continuation byte (10xxxxxx) starts one.
size_t code_points(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

/// text right-aligned in `width` code points; never cut.
std::string padded_left(const std::string& text, size_t width) {
  const size_t length = code_points(text);
  std::string out(width > length ? width - length : 0, ' ');
  return out.append(text);
}

std::string table(const Confusion& confusion, const std::vector<std::string>& labels) {
  const int64_t K = confusion.classes();
  // Columns as wide as the longest label or count (at least 8, the row labels at least 12): labels are
  // printed whole, so no two read the same and no UTF-8 character is split.
  size_t label_width = 0;
  for (const std::string& label : labels) label_width = std::max(label_width, code_points(label));
  int64_t largest = 0;
  for (const auto& [cell, n] : confusion.cells()) largest = std::max(largest, n);
  const size_t column = std::max({size_t{8}, label_width, std::to_string(largest).size()});
  const size_t row_label = std::max(size_t{12}, label_width);
  std::string out = "confusion matrix (rows: true label, columns: predicted)\n" + std::string(row_label, ' ');
  for (const std::string& label : labels) (out += ' ') += padded_left(label, column);
  out += '\n';
  for (int64_t t = 0; t < K; ++t) {
    out += padded_left(labels[t], row_label);
    for (int64_t p = 0; p < K; ++p) (out += ' ') += padded_left(std::to_string(confusion.at(t, p)), column);
    out += '\n';
  }
  return out;
}

std::string summary(const Confusion& confusion, const std::vector<std::string>& labels) {
  using Cell = std::pair<std::pair<int64_t, int64_t>, int64_t>;
  std::vector<Cell> errors;
  int64_t total = 0, wrong = 0;
  for (const auto& cell : confusion.cells()) {
    total += cell.second;
    if (cell.first.first == cell.first.second) continue;
    wrong += cell.second;
    errors.push_back(cell);
  }
  const size_t shown = std::min<size_t>(errors.size(), kConfusionSummaryRows);
  std::partial_sort(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(shown), errors.end(),
                    [](const Cell& a, const Cell& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  std::string out = cat("confusion: ", confusion.classes(), " classes, too many for a table (eval --json lists every "
                        "nonzero cell); ", wrong, " of ", total, " examples misclassified, in ", errors.size(),
                        " distinct (true, predicted) pairs\n");
  if (shown > 0) out += cat("the ", shown, " most frequent (count  #true label -> #predicted label):\n");
  for (size_t i = 0; i < shown; ++i) {
    const auto [t, p] = errors[i].first;
    out += cat(padded_left(std::to_string(errors[i].second), 8), "  #", t, " ", labels[t], " -> #", p, " ", labels[p], "\n");
  }
  return out;
}

}  // namespace

std::string confusion_text(const Confusion& confusion, const std::vector<std::string>& labels) {
  if (static_cast<int64_t>(labels.size()) != confusion.classes())
    throw ValueError(cat("confusion_text: ", labels.size(), " labels for ", confusion.classes(), " classes"));
  return confusion.classes() <= kConfusionTableClasses ? table(confusion, labels) : summary(confusion, labels);
}

}  // namespace tapegrad
