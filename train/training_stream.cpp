#include "train/training_stream.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "train/data/tsv.h"
#include "train/io/fingerprint.h"
#include "train/io/read_file.h"
#include "train/io/strict_json.h"
#include "train/next_token_model.h"

namespace tapegrad {

using nlohmann::json;

namespace {

constexpr uint64_t kShuffleStream = 0x73687566666c65ULL;
constexpr uint64_t kWindowStream = 0x77696e646f7773ULL;

int64_t longest_sequence(const std::vector<Example>& examples) {
  int64_t longest = 1;
  for (const Example& e : examples) longest = std::max<int64_t>(longest, static_cast<int64_t>(split_words(e.text).size()));
  return longest;
}

/// A fingerprint of labelled examples as read (labels and texts, train/io/fingerprint.h): trainer.json keeps
/// it, and --resume goes on only with the data the run started with, whatever path or pipe brings it.
std::string examples_fingerprint(const std::vector<Example>& examples) {
  Fingerprint hash;
  for (const Example& e : examples) {
    hash.mix(e.label, '\t');
    hash.mix(e.text, '\n');
  }
  return hash.hex();
}

bool is_pipe(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_fifo(path, ec) || std::filesystem::is_socket(path, ec);
}

/// A language model's text file, read whole and checked (tokenizer.h); a text, its fingerprint and whether it
/// came from a pipe.
std::string read_text(const std::string& path, nlohmann::json& sources, const char* key, const char* pipe_key) {
  std::string text = read_whole_file(path, kTextLimit);
  check_corpus_text(text, path);
  sources[key] = fingerprint(text);
  sources[pipe_key] = is_pipe(path);
  return text;
}

/// The tokenizer of a new run: a SentencePiece model of the user's (tokenizer_model), or one learnt from the
/// training text (TrainOptions::tokenizer). Their errors name the file and the vocabulary size.
Tokenizer make_tokenizer(const TrainOptions& o, std::string_view text) {
  if (!o.tokenizer_model.empty()) return Tokenizer::from_sentencepiece_model(o.tokenizer_model);
  if (o.tokenizer == "bpe") return Tokenizer::learn_bpe(text, o.vocab_size, o.data, "--vocab-size");
  return Tokenizer::learn(tokenizer_kind(o.tokenizer), text, o.data);
}

TrainingData load_text_data(const TrainOptions& o, const Tokenizer* fixed_tokenizer) {
  TrainingData d;
  const std::string text = read_text(o.data, d.sources, "fingerprint", "pipe");
  d.tokenizer.emplace(fixed_tokenizer ? *fixed_tokenizer : make_tokenizer(o, text));
  std::vector<int64_t> train = d.tokenizer->encode(text), valid;
  if (o.valid.empty()) {  // the end of the text: one contiguous piece, so no validation window overlaps training
    const auto held_out = static_cast<int64_t>(static_cast<double>(train.size()) * o.valid_fraction);
    if (held_out < 2 || static_cast<int64_t>(train.size()) - held_out < 2)
      throw ValueError(cat("--valid-fraction ", o.valid_fraction, " of the ", train.size(), train.size() == 1 ? " token" : " tokens", " of ", o.data,
                           " holds out ", held_out, " and trains on ", static_cast<int64_t>(train.size()) - held_out,
                           ": each part needs at least 2 tokens; give another --valid-fraction, more text or --valid"));
    valid.assign(train.end() - held_out, train.end());
    train.resize(train.size() - static_cast<size_t>(held_out));
  } else {
    valid = d.tokenizer->encode(read_text(o.valid, d.sources, "valid_fingerprint", "valid_pipe"));
    if (valid.size() < 2) throw ValueError(cat(o.valid, ": ", valid.size(), " token; a validation text needs at least 2"));
  }
  const int64_t T = language_model_context(o);
  d.valid = consecutive_windows(valid, T);
  d.valid_characters_per_token =
      static_cast<double>(count_characters(d.tokenizer->decode(valid))) / static_cast<double>(valid.size());
  d.longest = T;
  d.stream = std::make_unique<TrainingStream>(
      RandomWindows(std::make_shared<const std::vector<int64_t>>(std::move(train)), T, o.seed ^ kWindowStream));
  return d;
}

}  // namespace

json to_json(const Generator::State& s) {
  return {{"words", s.words}, {"has_spare_normal", s.has_spare_normal}, {"spare_normal", s.spare_normal}};
}

Generator::State generator_state(const json& j, const std::string& file, const std::string& prefix) {
  JsonFields fields(j, file, prefix);
  Generator::State state{};
  const json& words = fields.array("words", state.words.size());
  for (size_t i = 0; i < state.words.size(); ++i) {
    if (!words[i].is_number_unsigned())
      throw IOError(cat(file, ": ", fields.quoted("words"), " must hold non-negative integers, got ", words[i].dump()));
    state.words[i] = words[i].get<uint64_t>();
  }
  if (state.words == decltype(state.words){})
    throw IOError(cat(file, ": ", fields.quoted("words"),
                      " are all 0, a state no generator reaches (it would give only zeros)"));
  state.has_spare_normal = fields.boolean("has_spare_normal");
  state.spare_normal = fields.number("spare_normal");
  fields.refuse_unknown();
  return state;
}

TrainingStream::TrainingStream(std::vector<Example> examples, bool shuffle, uint64_t seed)
    : examples_(std::move(examples)), shuffle_(shuffle), shuffle_gen_(seed ^ kShuffleStream) {
  start_epoch();
}

std::vector<Example> TrainingStream::next_batch(int64_t n) {
  if (windows_) return windows_->next_batch(n);
  if (task_) return task_->take(n);
  if (cursor_ == size()) {
    ++epoch_;
    start_epoch();
  }
  std::vector<Example> batch;
  for (; cursor_ < size() && static_cast<int64_t>(batch.size()) < n; ++cursor_) batch.push_back(examples_[order_[cursor_]]);
  return batch;
}

json TrainingStream::state() const {
  if (windows_) return {{"windows", to_json(windows_->state())}};
  if (task_) return {{"task", to_json(task_->state())}};
  return {{"epoch", epoch_}, {"cursor", cursor_}, {"epoch_start_rng", to_json(epoch_start_)}};
}

void TrainingStream::set_state(const json& j, const std::string& file) {
  const std::string prefix = "rng.data.";
  JsonFields fields(j, file, prefix);
  if (windows_) {
    windows_->set_state(generator_state(fields.object("windows"), file, prefix + "windows."));
  } else if (task_) {
    task_->set_state(generator_state(fields.object("task"), file, prefix + "task."));
  } else {
    epoch_ = fields.integer_in("epoch", 0, kMaxSteps);
    shuffle_gen_.set_state(generator_state(fields.object("epoch_start_rng"), file, prefix + "epoch_start_rng."));
    start_epoch();  // redraws this epoch's order from the state it started with
    cursor_ = fields.integer_in("cursor", 0, size());
  }
  fields.refuse_unknown();
}

void TrainingStream::start_epoch() {
  epoch_start_ = shuffle_gen_.state();
  order_.resize(examples_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
  if (shuffle_)
    for (int64_t i = size() - 1; i > 0; --i) std::swap(order_[i], order_[shuffle_gen_.below(i + 1)]);
  cursor_ = 0;
}

TrainingData load_training_data(const TrainOptions& o, const Vocab* fixed_vocab, const Tokenizer* fixed_tokenizer) {
  if (is_language_model(o)) return load_text_data(o, fixed_tokenizer);
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
    d.sources = {{"fingerprint", examples_fingerprint(train)}, {"pipe", is_pipe(o.data)}};
    if (o.valid.empty()) {
      Split parts = split(train, o.valid_fraction, o.seed);
      train = std::move(parts.train);
      d.valid = std::move(parts.valid);
    } else {
      d.valid = read_tsv(o.valid).examples;
      d.sources["valid_fingerprint"] = examples_fingerprint(d.valid);
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
