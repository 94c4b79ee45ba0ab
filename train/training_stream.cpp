#include "train/training_stream.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "train/data/tsv.h"

namespace tapegrad {

using nlohmann::json;

namespace {

constexpr uint64_t kShuffleStream = 0x73687566666c65ULL;

int64_t longest_sequence(const std::vector<Example>& examples) {
  int64_t longest = 1;
  for (const Example& e : examples) longest = std::max<int64_t>(longest, static_cast<int64_t>(split_words(e.text).size()));
  return longest;
}

/// A fingerprint of labelled examples as read (FNV-1a over labels and texts, 16 hex digits): trainer.json
/// keeps it, and --resume goes on only with the data the run started with, whatever path or pipe brings it.
std::string fingerprint(const std::vector<Example>& examples) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto mix = [&hash](std::string_view bytes, char end) {
    for (char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    hash = (hash ^ static_cast<unsigned char>(end)) * 0x100000001b3ULL;
  };
  for (const Example& e : examples) {
    mix(e.label, '\t');
    mix(e.text, '\n');
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

bool is_pipe(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_fifo(path, ec) || std::filesystem::is_socket(path, ec);
}

}  // namespace

json to_json(const Generator::State& s) {
  return {{"words", s.words}, {"has_spare_normal", s.has_spare_normal}, {"spare_normal", s.spare_normal}};
}

Generator::State generator_state(const json& j) {
  return {j.at("words").get<std::array<uint64_t, 4>>(), j.at("has_spare_normal").get<bool>(),
          j.at("spare_normal").get<double>()};
}

TrainingStream::TrainingStream(std::vector<Example> examples, bool shuffle, uint64_t seed)
    : examples_(std::move(examples)), shuffle_(shuffle), shuffle_gen_(seed ^ kShuffleStream) {
  start_epoch();
}

std::vector<Example> TrainingStream::next_batch(int64_t n) {
  if (!fixed()) return task_->take(n);
  if (cursor_ == size()) {
    ++epoch_;
    start_epoch();
  }
  std::vector<Example> batch;
  for (; cursor_ < size() && static_cast<int64_t>(batch.size()) < n; ++cursor_) batch.push_back(examples_[order_[cursor_]]);
  return batch;
}

json TrainingStream::state() const {
  if (!fixed()) return {{"task", to_json(task_->state())}};
  return {{"epoch", epoch_}, {"cursor", cursor_}, {"epoch_start_rng", to_json(epoch_start_)}};
}

void TrainingStream::set_state(const json& j) {
  if (!fixed()) {
    task_->set_state(generator_state(j.at("task")));
    return;
  }
  epoch_ = j.at("epoch").get<int64_t>();
  shuffle_gen_.set_state(generator_state(j.at("epoch_start_rng")));
  start_epoch();  // redraws this epoch's order from the state it started with
  cursor_ = j.at("cursor").get<int64_t>();
}

void TrainingStream::start_epoch() {
  epoch_start_ = shuffle_gen_.state();
  order_.resize(examples_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
  if (shuffle_)
    for (int64_t i = size() - 1; i > 0; --i) std::swap(order_[i], order_[shuffle_gen_.below(i + 1)]);
  cursor_ = 0;
}

TrainingData load_training_data(const TrainOptions& o, const Vocab* fixed_vocab) {
  TrainingData d;
  if (o.data.empty()) {
    TaskStream probe(o.task, o.seed);
    d.labels = probe.labels();
    d.vocab = fixed_vocab ? *fixed_vocab : Vocab::build(probe.all_words());
    d.valid = validation_set(o.task, o.seed, o.valid_size);
    if (o.train_size > 0)  // epochs on a fresh stream are validate()'s to refuse
      d.stream = std::make_unique<TrainingStream>(TaskStream(o.task, o.seed).take(o.train_size), o.shuffle, o.seed);
    else
      d.stream = std::make_unique<TrainingStream>(o.task, o.seed);
    d.longest = o.task.max_len;
  } else {
    std::vector<Example> train = read_tsv(o.data).examples;
    d.sources = {{"fingerprint", fingerprint(train)}, {"pipe", is_pipe(o.data)}};
    if (o.valid.empty()) {
      Split parts = split(train, o.valid_fraction, o.seed);
      train = std::move(parts.train);
      d.valid = std::move(parts.valid);
    } else {
      d.valid = read_tsv(o.valid).examples;
      d.sources["valid_fingerprint"] = fingerprint(d.valid);
      d.sources["valid_pipe"] = is_pipe(o.valid);
    }
    if (train.empty())
      throw ValueError(cat(o.data, ": no training examples left after the validation split (",
                           d.valid.size(), " held out); give more data or --valid"));
    d.labels = sorted_labels(train);
    if (d.labels.size() < 2)
      throw ValueError(cat(o.data, ": every training example has the label '", d.labels.front(),
                           "'; a classifier needs at least two classes"));
    for (const Example& e : d.valid)
      if (!std::binary_search(d.labels.begin(), d.labels.end(), e.label))
        throw ValueError(cat(o.valid.empty() ? o.data : o.valid, ": validation label '", e.label,
                             "' does not occur in the training data"));
    std::vector<std::string> texts;
    for (const Example& e : train) texts.push_back(e.text);
    d.vocab = fixed_vocab ? *fixed_vocab : Vocab::build(texts);
    d.longest = longest_sequence(train);
    d.stream = std::make_unique<TrainingStream>(std::move(train), o.shuffle, o.seed);
  }
  if (d.valid.empty()) throw ValueError("no validation examples: give --valid or a larger --valid-fraction");
  return d;
}

}  // namespace tapegrad
