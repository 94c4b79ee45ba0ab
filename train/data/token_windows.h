#pragma once
// A language model's examples: windows of consecutive token ids of its text (Example::tokens). A window of
// n + 1 tokens trains n predictions: the model reads tokens 0..n-1 and predicts tokens 1..n.
//   training:   windows of T + 1 tokens at uniformly random starts (nanoGPT's choice): every batch is an
//               independent sample of the text, there are no epochs to finish, and a run resumes from the
//               generator's state alone;
//   evaluation: windows that start every T tokens, so that every token but the text's first is predicted
//               exactly once, each from the tokens before it in its window (0 to T - 1 of them).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "autograd/random.h"
#include "train/data/example.h"

namespace tapegrad {

/// Windows of up to T + 1 tokens starting at tokens 0, T, 2T, ...; the last holds what is left (at least 2
/// tokens). Fewer than 2 tokens give none; T < 1 is a ValueError.
std::vector<Example> consecutive_windows(std::span<const int64_t> ids, int64_t T);

/// Training windows of min(T, n - 1) + 1 tokens of an n-token text at uniformly random starts.
class RandomWindows {
 public:
  /// ids: the training text's tokens (at least 2, else a ValueError); T >= 1.
  RandomWindows(std::shared_ptr<const std::vector<int64_t>> ids, int64_t T, uint64_t seed);

  /// The next n windows.
  std::vector<Example> next_batch(int64_t n);
  int64_t window() const { return window_; }

  /// Where the draws stand, to continue exactly (resume).
  Generator::State state() const { return gen_.state(); }
  void set_state(const Generator::State& state) { gen_.set_state(state); }

 private:
  std::shared_ptr<const std::vector<int64_t>> ids_;
  int64_t window_;  // tokens a window holds: T + 1, or the whole text when shorter
  Generator gen_;
};

}  // namespace tapegrad
