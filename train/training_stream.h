#pragma once
// Where training batches come from: a fresh task stream, or a fixed set visited in shuffled epochs, with
// the state that --resume needs to continue either one exactly.
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/random.h"
#include "train/tasks.h"

namespace tapegrad {

/// A generator's state as trainer.json holds it, and back (json exceptions when malformed).
nlohmann::json to_json(const Generator::State& state);
Generator::State generator_state(const nlohmann::json& json);

/// The training examples, one batch at a time: a fresh task stream, or a fixed set visited in epochs
/// (reshuffled at the start of each epoch unless --no-shuffle; the last batch of an epoch may be smaller).
class TrainingStream {
 public:
  TrainingStream(const TaskOptions& task, uint64_t seed) : task_(TaskStream(task, seed)) {}
  TrainingStream(std::vector<Example> examples, bool shuffle, uint64_t seed);

  bool fixed() const { return !task_.has_value(); }
  int64_t epoch() const { return epoch_; }
  int64_t size() const { return static_cast<int64_t>(examples_.size()); }

  /// The next n examples (fewer at the end of an epoch of a fixed set).
  std::vector<Example> next_batch(int64_t n);

  /// Where the stream stands, for trainer.json; set_state continues from it.
  nlohmann::json state() const;
  void set_state(const nlohmann::json& state);

 private:
  void start_epoch();

  std::optional<TaskStream> task_;
  std::vector<Example> examples_;
  std::vector<int64_t> order_;
  bool shuffle_ = true;
  Generator shuffle_gen_{0};
  Generator::State epoch_start_{};
  int64_t epoch_ = 0, cursor_ = 0;
};

}  // namespace tapegrad
