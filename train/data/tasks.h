#pragma once
// Built-in synthetic sequence-classification tasks, generated on the fly and deterministic from a seed:
//   majority: L words drawn uniformly from t0..t{V-1}; the label is the most frequent word ("t3").
//             Examples whose top count is tied are drawn again, so the label is always unique. V classes.
//   order   : L - 2 filler words from t0..t{V-1} plus the markers "A" and "B", each exactly once, at two
//             distinct uniformly drawn positions; the label is "AB" when A comes first, else "BA".
// L is uniform in [min_len, max_len] (for order, in [max(min_len, 2), max_len]); V = symbols.
// Draw order per example (part of the format: a seed names the same data forever):
//   majority: L, then each word;  order: L, position of A, position of B, then each filler word.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/error.h"
#include "autograd/random.h"
#include "train/data/example.h"

namespace tapegrad {

struct TaskOptions {
  std::string name;  // "majority" or "order"
  int64_t symbols = 8;
  int64_t min_len = 8;
  int64_t max_len = 32;
};

/// Names of the built-in tasks.
const std::vector<std::string>& task_names();

/// Throws ValueError when the options describe no task: unknown name (the message lists the choices),
/// symbols outside [2, kMaxSymbols], lengths outside 1 <= min_len <= max_len <= kMaxLength, order with max_len < 2.
/// `name` names a field ("symbols") as the caller does: "TaskOptions.symbols" by default, the flag "--symbols"
/// on the command line.
void validate_task(const TaskOptions& options, const std::function<std::string(std::string_view field)>& name =
                                                   [](std::string_view field) { return cat("TaskOptions.", field); });

/// Upper bounds that only a typo exceeds: labels() and the vocabulary grow with symbols, an example with L.
inline constexpr int64_t kMaxSymbols = int64_t{1} << 16;
inline constexpr int64_t kMaxLength = int64_t{1} << 20;

/// An endless, deterministic stream of examples of one task.
class TaskStream {
 public:
  /// Validates the options (ValueError) and seeds the stream.
  TaskStream(TaskOptions options, uint64_t seed);

  /// The next example; advances the generator.
  Example next();
  /// The next n examples.
  std::vector<Example> take(int64_t n);
  /// The class labels, in class-index order: t0..t{V-1} for majority, {"AB", "BA"} for order.
  std::vector<std::string> labels() const;
  /// Every word an example can contain, in a fixed order (build the vocabulary from these).
  std::vector<std::string> all_words() const;
  const TaskOptions& options() const { return options_; }

  /// The generator state: restoring it continues the stream exactly (checkpoints).
  Generator::State state() const { return gen_.state(); }
  void set_state(const Generator::State& state) { gen_.set_state(state); }

 private:
  Example next_majority();
  Example next_order();
  int64_t draw_length(int64_t min_len);

  TaskOptions options_;
  Generator gen_;
};

/// The fixed validation set of a task: the first n examples of a stream seeded with
/// validation_seed(seed), which differs from the training stream of the same seed.
std::vector<Example> validation_set(const TaskOptions& options, uint64_t seed, int64_t n = 2000);
/// The seed of the validation stream for a training seed.
uint64_t validation_seed(uint64_t seed);

}  // namespace tapegrad
