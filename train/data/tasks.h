#pragma once
// Synthetic sequence-classification tasks, generated on the fly and deterministic from a seed, chosen by name
// from a registry (register_task below: a user's program registers its own exactly as these are). Built in:
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
#include "autograd/named_registry.h"
#include "autograd/random.h"
#include "train/data/example.h"

namespace tapegrad {

struct TaskOptions {
  std::string name;  // a registered task: "majority", "order", or a user's
  int64_t symbols = 8;
  int64_t min_len = 8;
  int64_t max_len = 32;
};

/// How a check names a field of TaskOptions ("symbols"): "TaskOptions.symbols", or the flag "--symbols".
using TaskFieldNames = std::function<std::string(std::string_view field)>;

/// A task: what one example is, and what its labels and words are, from TaskOptions.
struct TaskEntry {
  std::string name = {}, help = {};
  /// One example, drawn from gen. The order of the draws is part of the task's format: a seed names the same
  /// data forever.
  std::function<Example(const TaskOptions&, Generator& gen)> next = {};
  /// The class labels, in class-index order.
  std::function<std::vector<std::string>(const TaskOptions&)> labels = {};
  /// Every word an example can contain, in a fixed order (the vocabulary is built from these).
  std::function<std::vector<std::string>(const TaskOptions&)> words = {};
  /// Optional: the task's own checks after the common ones (order: max_len >= 2); a ValueError naming the
  /// fields by name(field).
  std::function<void(const TaskOptions&, const TaskFieldNames& name)> validate = {};
};

/// Adds a task; a missing name, next, labels or words, or a name registered before, is a ValueError. Returns
/// true, so that a file registers at load time.
bool register_task(TaskEntry entry);
/// The registered tasks (majority and order first): task_registry().at(name), .names(), .choices().
const NamedRegistry<TaskEntry>& task_registry();

/// Throws ValueError when the options describe no task: unknown name ("unknown task 'x' (registered:
/// majority or order)"), symbols outside [2, kMaxSymbols], lengths outside 1 <= min_len <= max_len <=
/// kMaxLength, then the task's own checks (order: max_len < 2). `name` names a field ("symbols") as the
/// caller does: "TaskOptions.symbols" by default, the flag "--symbols" on the command line.
void validate_task(const TaskOptions& options, const TaskFieldNames& name =
                                                   [](std::string_view field) { return cat("TaskOptions.", field); });

/// A length uniform in [min_len, max_len] (one draw), as the built-in tasks draw theirs.
int64_t draw_length(Generator& gen, int64_t min_len, int64_t max_len);
/// The i-th symbol word, "t<i>".
std::string symbol_word(int64_t i);

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
  /// The class labels, in class-index order: t0..t{V-1} for majority, {"AB", "BA"} for order (the task's).
  std::vector<std::string> labels() const;
  /// Every word an example can contain, in a fixed order (build the vocabulary from these).
  std::vector<std::string> all_words() const;
  const TaskOptions& options() const { return options_; }

  /// The generator state: restoring it continues the stream exactly (checkpoints).
  Generator::State state() const { return gen_.state(); }
  void set_state(const Generator::State& state) { gen_.set_state(state); }

 private:
  TaskOptions options_;
  const TaskEntry* task_;  // the registered entry: entries stay where they are
  Generator gen_;
};

/// The fixed validation set of a task: the first n examples of a stream seeded with
/// validation_seed(seed), which differs from the training stream of the same seed.
std::vector<Example> validation_set(const TaskOptions& options, uint64_t seed, int64_t n = 2000);
/// The seed of the validation stream for a training seed.
uint64_t validation_seed(uint64_t seed);

}  // namespace tapegrad
