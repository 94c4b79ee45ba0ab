#pragma once
// The language model as a run trains it (trainable_model.h): its examples are windows of token ids
// (data/token_windows.h), its loss the cross-entropy of the next token at every position, its evaluation the
// mean of that loss over every predicted token of the text (perplexity = exp(loss)), and its config.json the
// language model's options with "kind": "language_model".
// Letters: B windows, T positions read (a window's tokens but its last), V vocab.
#include <cstdint>
#include <memory>
#include <vector>

#include <string>
#include <string_view>

#include "nn/language_model.h"
#include "train/data/tokenizer.h"
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

/// Code points of a UTF-8 text: the bytes that do not continue a sequence.
int64_t count_characters(std::string_view text);

/// A mean next-token loss (nats) as bits per character of a text of `tokens` tokens and `characters` code
/// points: loss · tokens / characters / ln 2 (the text's first token, which nothing predicts, counted as if it
/// were: the difference is one token in the text's length).
double bits_per_character(double loss, int64_t tokens, int64_t characters);

/// A text scored by a language model, every token but the first predicted once.
struct TextEvaluation {
  Evaluation evaluation;  // mean loss (nats per token), next-token accuracy, tokens predicted
  int64_t tokens = 0, characters = 0, unknown = 0;  // of the text; unknown: tokens the tokenizer lacks (<unk>)
  double perplexity = 0, bits_per_character = 0;
};

class NextTokenModel;
/// The text tokenized and cut into consecutive_windows of the model's context length (token_windows.h): each
/// token is predicted from the tokens before it in its window (0 to T - 1 of them), in batches of at most
/// max_tokens positions. A text of fewer than 2 tokens is a ValueError naming `what`.
TextEvaluation evaluate_text(NextTokenModel& model, const Tokenizer& tokenizer, std::string_view text,
                             int64_t max_tokens, const std::string& what);

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
