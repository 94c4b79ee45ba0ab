#pragma once
// Where a run's examples come from: the data files (or a task) read once into a vocabulary, the labels, a
// validation set and the training stream, which hands out batches from a fresh task stream or a fixed set
// visited in shuffled epochs, with the state that --resume needs to continue either one exactly. A language
// model's text becomes a tokenizer, the windows of its validation text, and a stream of random windows.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/random.h"
#include "train/data/tasks.h"
#include "train/data/token_windows.h"
#include "train/data/tokenizer.h"
#include "train/data/vocab.h"
#include "train/train_options.h"

namespace tapegrad {

/// A generator's state as trainer.json holds it, and back: IOError naming `file` and the key below `prefix`
/// when it is not one a generator can be in (its four words all zero would give zeros forever).
nlohmann::json to_json(const Generator::State& state);
Generator::State generator_state(const nlohmann::json& json, const std::string& file, const std::string& prefix);

/// The training examples, one batch at a time: a fresh task stream, a language model's random windows, or a
/// fixed set visited in epochs (reshuffled at the start of each epoch unless --no-shuffle; the last batch of
/// an epoch may be smaller).
class TrainingStream {
 public:
  TrainingStream(const TaskOptions& task, uint64_t seed) : task_(TaskStream(task, seed)) {}
  explicit TrainingStream(RandomWindows windows) : windows_(std::move(windows)) {}
  TrainingStream(std::vector<Example> examples, bool shuffle, uint64_t seed);

  bool fixed() const { return !task_.has_value() && !windows_.has_value(); }
  int64_t epoch() const { return epoch_; }
  int64_t size() const { return static_cast<int64_t>(examples_.size()); }

  /// The next n examples (fewer at the end of an epoch of a fixed set).
  std::vector<Example> next_batch(int64_t n);

  /// Where the stream stands, for trainer.json's 'rng.data'; set_state continues from it (IOError naming
  /// `file` and the key when it is not a state of this stream: an epoch's cursor beyond its examples).
  nlohmann::json state() const;
  void set_state(const nlohmann::json& state, const std::string& file);

 private:
  void start_epoch();

  std::optional<TaskStream> task_;
  std::optional<RandomWindows> windows_;
  std::vector<Example> examples_;
  std::vector<int64_t> order_;
  bool shuffle_ = true;
  Generator shuffle_gen_{0};
  Generator::State epoch_start_{};
  int64_t epoch_ = 0, cursor_ = 0;
};

/// A run's examples, each data file read exactly once (so that `--data <(command)` works).
struct TrainingData {
  Vocab vocab;                      // a classifier's
  std::vector<std::string> labels;  // sorted; line k of labels.txt names class k
  std::optional<Tokenizer> tokenizer;      // a language model's (vocab and labels are then empty)
  double valid_characters_per_token = 1;   // a language model's validation text: for bits per character
  std::vector<Example> valid;
  std::unique_ptr<TrainingStream> stream;
  int64_t longest = 0;  // words in the longest training sequence the data or the task can produce
  // trainer.json's "data": the fingerprints of the data (and valid) files' examples, and whether they
  // were pipes, so that a resumed run goes on only with the examples it started with.
  nlohmann::json sources = nlohmann::json::object();
};

/// Reads options.data (and options.valid), or draws the task's validation set and training stream; the
/// vocabulary is built from the training texts unless fixed_vocab is given (--init, resume). A data set
/// that cannot make a classifier (no training examples left, one label, a validation label never seen
/// in training, no validation examples) is a ValueError naming the file.
///   A language model (is_language_model) reads its text as hostile (check_corpus_text), tokenizes it with
/// fixed_tokenizer or one learnt from the training text (options.tokenizer), and holds out the text's last
/// valid_fraction of tokens unless options.valid is given (contiguous, so that no validation window overlaps
/// a training one); the validation windows are consecutive_windows of the context length, the stream
/// RandomWindows of it.
TrainingData load_training_data(const TrainOptions& options, const Vocab* fixed_vocab,
                                const Tokenizer* fixed_tokenizer = nullptr);

}  // namespace tapegrad
