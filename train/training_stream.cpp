#include "train/training_stream.h"

#include <utility>

namespace tapegrad {

using nlohmann::json;

namespace {
constexpr uint64_t kShuffleStream = 0x73687566666c65ULL;
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

}  // namespace tapegrad
