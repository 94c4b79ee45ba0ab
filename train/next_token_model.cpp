#include "train/next_token_model.h"

#include "train/data/token_windows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "autograd/autograd.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_config.h"

namespace tapegrad {

WindowBatch make_window_batch(const std::vector<Example>& windows, int64_t context_length, int64_t vocab_size) {
  int64_t T = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto n = static_cast<int64_t>(windows[w].tokens.size());
    if (n < 2 || n > context_length + 1)
      throw ValueError(cat("window ", w + 1, " has ", n, " tokens: a window holds 2 to context_length + 1 = ",
                           context_length + 1));
    T = std::max(T, n - 1);
  }
  const auto B = static_cast<int64_t>(windows.size());
  std::vector<int64_t> inputs(static_cast<size_t>(B * T), 0), targets(static_cast<size_t>(B * T), -100);
  WindowBatch batch;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t>& tokens = windows[static_cast<size_t>(b)].tokens;
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= vocab_size)
        throw ValueError(cat("window ", b + 1, ": token id ", tokens[i], " is outside the vocabulary [0, ", vocab_size, ")"));
    const auto n = static_cast<int64_t>(tokens.size()) - 1;
    std::copy(tokens.begin(), tokens.end() - 1, inputs.begin() + b * T);
    std::copy(tokens.begin() + 1, tokens.end(), targets.begin() + b * T);
    batch.predicted += n;
  }
  batch.inputs = ids(inputs, {B, T});
  batch.targets = ids(targets, {B * T});
  return batch;
}

namespace {

/// Row `row` of contiguous (rows, V) logits (float32 or float64) into `out` (V doubles).
void copy_row(const Tensor& logits, int64_t row, std::vector<double>& out) {
  const auto V = static_cast<int64_t>(out.size());
  if (logits.dtype() == DType::float64) {
    const double* z = logits.data<double>() + row * V;
    std::copy(z, z + V, out.begin());
  } else {
    const float* z = logits.data<float>() + row * V;
    std::copy(z, z + V, out.begin());
  }
}

}  // namespace

NextTokenModel::NextTokenModel(std::unique_ptr<nn::LanguageModel> model) : model_(std::move(model)) {
  if (!model_) throw ValueError("NextTokenModel: no model");
}

BatchLoss NextTokenModel::loss(const std::vector<Example>& windows) {
  const nn::LanguageModelOptions& o = model_->options();
  const WindowBatch batch = make_window_batch(windows, o.context_length, o.vocab_size);
  const Tensor logits = model_->forward(batch.inputs);  // (B, T, V)
  return {cross_entropy(reshape(logits, {logits.size(0) * logits.size(1), o.vocab_size}), batch.targets),
          model_->auxiliary_loss(), 0};
}

Evaluation NextTokenModel::evaluate(const std::vector<Example>& windows, int64_t max_tokens) {
  const nn::LanguageModelOptions& o = model_->options();
  const int64_t V = o.vocab_size;
  Evaluation result;
  double loss_sum = 0;
  int64_t correct = 0;
  nn::EvalModeGuard eval(*model_);
  NoGradGuard no_grad;
  for (size_t first = 0; first < windows.size();) {
    // As many windows as max_tokens positions hold (at least one).
    size_t end = first + 1;
    for (auto positions = static_cast<int64_t>(windows[first].tokens.size()) - 1; end < windows.size(); ++end) {
      positions += static_cast<int64_t>(windows[end].tokens.size()) - 1;
      if (positions > max_tokens) break;
    }
    const std::vector<Example> part(windows.begin() + static_cast<std::ptrdiff_t>(first),
                                    windows.begin() + static_cast<std::ptrdiff_t>(end));
    const WindowBatch batch = make_window_batch(part, o.context_length, V);
    // Read in place, a row at a time: the batch's (B, T, V) logits are a training step's largest tensor,
    // and a copy of them all in double would triple what evaluation holds (training_memory.cpp counts one).
    const Tensor logits = model_->forward(batch.inputs).contiguous();
    const std::vector<double> targets = batch.targets.to_vector();
    const int64_t T = batch.inputs.size(1);
    std::vector<double> row_logits(static_cast<size_t>(V));
    for (size_t row = 0; row < targets.size(); ++row) {
      if (targets[row] < 0) continue;  // padding
      copy_row(logits, static_cast<int64_t>(row), row_logits);
      const double* z = row_logits.data();
      const auto target = static_cast<int64_t>(targets[row]);
      const int64_t predicted = std::max_element(z, z + V) - z;
      double sum_exp = 0;
      for (int64_t k = 0; k < V; ++k) sum_exp += std::exp(z[k] - z[predicted]);
      const double loss = std::log(sum_exp) - (z[target] - z[predicted]);  // log sum_j exp(z_j) - z_target
      if (!std::isfinite(loss)) {
        // Weights that are not finite themselves are the run's to report (it names the step and the
        // parameter): their evaluation is NaN, not a number.
        if (!first_non_finite(model_->named_parameters()).empty()) {
          result.loss = result.accuracy = std::numeric_limits<double>::quiet_NaN();
          return result;
        }
        throw NonFiniteOutput(cat("evaluate: the loss of token ", static_cast<int64_t>(row) % T + 2, " of window ",
                                  first + static_cast<size_t>(static_cast<int64_t>(row) / T) + 1, " is not finite (",
                                  loss, "; the largest logit is ", z[predicted], ")"));
      }
      loss_sum += loss;
      correct += predicted == target;
      ++result.count;
    }
    first = end;
  }
  if (result.count > 0) {
    result.loss = loss_sum / static_cast<double>(result.count);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.count);
  }
  return result;
}

int64_t count_characters(std::string_view text) {
  int64_t characters = 0;
  for (char c : text) characters += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return characters;
}

double bits_per_character(double loss, int64_t tokens, int64_t characters) {
  return loss * static_cast<double>(tokens) / static_cast<double>(std::max<int64_t>(characters, 1)) / std::log(2.0);
}

TextEvaluation evaluate_text(NextTokenModel& model, const Tokenizer& tokenizer, std::string_view text,
                             int64_t max_tokens, const std::string& what) {
  TextEvaluation result;
  const std::vector<int64_t> ids = tokenizer.encode(text);
  result.tokens = static_cast<int64_t>(ids.size());
  if (result.tokens < 2)
    throw ValueError(cat(what, ": ", result.tokens, " token; scoring a text needs at least 2 (the first is not predicted)"));
  result.characters = count_characters(text);
  result.unknown = std::count(ids.begin(), ids.end(), Tokenizer::kUnk);
  result.evaluation = model.evaluate(consecutive_windows(ids, model.model().options().context_length), max_tokens);
  result.perplexity = std::exp(result.evaluation.loss);
  result.bits_per_character = bits_per_character(result.evaluation.loss, result.tokens, result.characters);
  return result;
}

nlohmann::json NextTokenModel::config() const { return language_model_config_json(model_->options()); }

}  // namespace tapegrad
