#include "train/data/token_windows.h"

#include <algorithm>
#include <utility>

#include "autograd/error.h"

namespace tapegrad {

std::vector<Example> consecutive_windows(std::span<const int64_t> ids, int64_t T) {
  if (T < 1) throw ValueError(cat("consecutive_windows: T = ", T, " must be >= 1"));
  std::vector<Example> windows;
  const auto n = static_cast<int64_t>(ids.size());
  for (int64_t start = 0; start + 1 < n; start += T) {
    const int64_t end = std::min(n, start + T + 1);
    windows.push_back({.label = {}, .text = {}, .tokens = {ids.begin() + start, ids.begin() + end}});
  }
  return windows;
}

RandomWindows::RandomWindows(std::shared_ptr<const std::vector<int64_t>> ids, int64_t T, uint64_t seed)
    : ids_(std::move(ids)), gen_(seed) {
  if (!ids_ || ids_->size() < 2)
    throw ValueError(cat("RandomWindows: a language model needs at least 2 tokens of text, got ",
                         ids_ ? ids_->size() : 0));
  if (T < 1) throw ValueError(cat("RandomWindows: T = ", T, " must be >= 1"));
  window_ = std::min<int64_t>(T + 1, static_cast<int64_t>(ids_->size()));
}

std::vector<Example> RandomWindows::next_batch(int64_t n) {
  const auto starts = static_cast<double>(static_cast<int64_t>(ids_->size()) - window_ + 1);
  std::vector<Example> batch(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (Example& example : batch) {
    // uniform() < 1, so the start is below `starts`; min() guards the rounding of the product.
    const auto start = std::min(static_cast<int64_t>(gen_.uniform() * starts), static_cast<int64_t>(starts) - 1);
    example.tokens.assign(ids_->begin() + start, ids_->begin() + start + window_);
  }
  return batch;
}

}  // namespace tapegrad
