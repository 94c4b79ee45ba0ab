#pragma once
// The language model as a run trains it (trainable_model.h): its examples are windows of token ids
// (data/token_windows.h), its loss the cross-entropy of the next token at every position, its evaluation the
// mean of that loss over every predicted token of the text (perplexity = exp(loss)), and its config.json the
// language model's options with "kind": "language_model".
// Letters: B windows, T positions read (a window's tokens but its last), V vocab.
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/language_model.h"
#include "train/trainable_model.h"

namespace tapegrad {

/// Windows as the model reads them: each window's tokens but the last, and each but the first as targets.
/// A window shorter than the longest is padded: id 0 read, target -100 (ignored).
struct WindowBatch {
  Tensor inputs;           // (B, T) int64
  Tensor targets;          // (B · T) int64, -100 where padded
  int64_t predicted = 0;   // targets that are not padding
};
/// A ValueError when a window has fewer than 2 tokens or more than context_length + 1, or an id outside
/// [0, vocab_size), naming the window and the id.
WindowBatch make_window_batch(const std::vector<Example>& windows, int64_t context_length, int64_t vocab_size);

class NextTokenModel : public TrainableModel {
 public:
  explicit NextTokenModel(std::unique_ptr<nn::LanguageModel> model);

  nn::Module& module() override { return *model_; }
  ///   cross_entropy(model(inputs) as (B·T, V), targets) over every predicted position [+ the layers' auxiliary_loss()]
  BatchLoss loss(const std::vector<Example>& windows) override;
  /// In eval mode without the tape, in batches of at most max_tokens positions: loss = the mean of
  /// -log p(token | the tokens before it in its window) over every predicted token (summed in double in
  /// order, so batching does not change it), accuracy = how often the most likely token was the next one,
  /// count = the tokens predicted. A non-finite logit or loss from finite weights is a NonFiniteOutput.
  Evaluation evaluate(const std::vector<Example>& windows, int64_t max_tokens) override;
  nlohmann::json config() const override;

  const nn::LanguageModel& model() const { return *model_; }

 private:
  std::unique_ptr<nn::LanguageModel> model_;
};

}  // namespace tapegrad
