#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/autograd.h"
#include "train/data/batching.h"
#include "train/checkpoint/checkpoint.h"
#include "train/train_options.h"

namespace tapegrad {

int64_t evaluation_tokens(int64_t train_batch_size, int64_t context_length) {
  if (train_batch_size <= 0 || context_length <= 0)
    throw ValueError(cat("evaluation_tokens: batch size ", train_batch_size, " and context length ", context_length,
                         " must be positive"));
  return train_batch_size * context_length;
}

std::string overflow_cause(const nn::Module& model, const nn::ClassifierOptions& options) {
  double squares = 0, largest = 0;
  std::string where;
  DType dtype = DType::float32;
  for (const auto& [name, w] : model.named_parameters()) {
    dtype = w.dtype();
    for (const double v : w.to_vector()) {
      squares += v * v;
      if (std::abs(v) > largest) largest = std::abs(v), where = name;
    }
  }
  std::string cause = cat("from finite weights of norm ", std::sqrt(squares), " (largest |w| ", largest, " in '", where, "')");
  if (const nn::VariantSettings attention = nn::chosen_settings<nn::AttentionKind>(options);
      attention.declares("temperature") && attention.real("temperature") != 1.0)
    cause += cat(" and attention temperature ", attention.real("temperature"));
  return cat(cause, ": the ", dtype_name(dtype), " forward overflows");
}

Tensor classify(nn::SequenceClassifier& model, const std::vector<std::vector<int64_t>>& sequences, int64_t max_tokens) {
  if (max_tokens <= 0) throw ValueError(cat("classify: max_tokens must be positive, got ", max_tokens));
  const int64_t N = static_cast<int64_t>(sequences.size()), K = model.options().num_classes;
  std::vector<int64_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  // Longest first: each batch's first sequence sets its padded length T.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sequences[a].size() > sequences[b].size(); });
  std::vector<double> logits(static_cast<size_t>(N * K));
  DType dtype = DType::float32;  // the model's: its logits'
  nn::EvalModeGuard eval(model);
  NoGradGuard no_grad;
  for (int64_t start = 0; start < N;) {
    const int64_t T = static_cast<int64_t>(sequences[order[start]].size());
    const int64_t B = std::clamp<int64_t>(max_tokens / std::max<int64_t>(T, 1), 1, N - start);
    const std::span<const int64_t> rows(order.data() + start, static_cast<size_t>(B));
    const PaddedIds batch = pad_sequences(sequences, rows);
    const Tensor out = model.forward(batch.ids, batch.key_padding_mask);  // (B, K)
    dtype = out.dtype();
    const std::vector<double> z = out.to_vector();
    for (int64_t b = 0; b < B; ++b) std::copy_n(z.begin() + b * K, K, logits.begin() + rows[b] * K);
    start += B;
  }
  if (const auto bad = std::find_if(logits.begin(), logits.end(), [](double v) { return !std::isfinite(v); });
      bad != logits.end()) {  // the first in the caller's order, not the batches'
    const int64_t at = bad - logits.begin(), sequence = at / K, class_index = at % K;
    throw NonFiniteOutput(cat("the logits of sequence ", sequence + 1, " are not finite (class ", class_index, " is ",
                              *bad, ") ", overflow_cause(model)),
                          sequence, class_index, *bad);
  }
  return tensor(logits, Shape{N, K}, dtype);
}

Evaluation evaluate(nn::SequenceClassifier& model, const std::vector<Example>& examples, const Vocab& vocab,
                    const std::vector<std::string>& labels, int64_t max_tokens) {
  const bool cls = nn::prepends_cls(model.options());
  const EncodedExamples encoded = encode_examples(examples, vocab, labels, model.options().context_length, cls);
  const std::vector<int64_t>& targets = encoded.targets;
  Evaluation result;
  result.truncated = encoded.truncated;
  const int64_t K = static_cast<int64_t>(labels.size());
  result.confusion = Confusion(K);
  result.count = static_cast<int64_t>(examples.size());
  if (result.count == 0) return result;
  if (K != model.options().num_classes)
    throw ValueError(cat("evaluate: ", K, " labels for a model of ", model.options().num_classes, " classes"));

  std::vector<double> logits;
  try {
    logits = classify(model, encoded.sequences, max_tokens).to_vector();
  } catch (const NonFiniteOutput& e) {
    // Weights that are not finite themselves are for their owner to report, with more context than this
    // function has: load_model refuses them (predict, eval), and train stops before publishing them,
    // naming the step, the parameter and the checkpoint kept. Their evaluation is NaN, not a number.
    if (!first_non_finite(model.named_parameters()).empty()) {
      result.loss = result.accuracy = std::numeric_limits<double>::quiet_NaN();
      return result;
    }
    throw NonFiniteOutput(cat("evaluate: the logits of example ", e.sequence + 1, " (label '", examples[e.sequence].label,
                              "') are not finite ('", labels[e.class_index], "' is ", e.value, ") ", overflow_cause(model)),
                          e.sequence, e.class_index, e.value);
  }
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < result.count; ++i) {
    const double* z = logits.data() + i * K;
    const int64_t predicted = std::max_element(z, z + K) - z;  // the first of tied maxima, as argmax
    double sum_exp = 0;
    for (int64_t k = 0; k < K; ++k) sum_exp += std::exp(z[k] - z[predicted]);
    const double loss = std::log(sum_exp) - (z[targets[i]] - z[predicted]);  // log sum_j exp(z_j) - z_target
    // Finite logits can still be 1e308 apart (a float64 model with huge weights).
    if (!std::isfinite(loss))
      throw NonFiniteOutput(cat("evaluate: the loss of example ", i + 1, " (label '", examples[i].label,
                                "') is not finite (", loss, ") from finite logits: the largest is ", z[predicted],
                                " and the label's ", z[targets[i]], " (", overflow_cause(model), ")"),
                            i);
    loss_sum += loss;
    correct += predicted == targets[i];
    result.confusion.add(targets[i], predicted);
  }
  result.loss = loss_sum / static_cast<double>(result.count);
  if (!std::isfinite(result.loss))  // each loss finite, their sum beyond double
    throw NonFiniteOutput(cat("evaluate: the mean loss is not finite (", result.loss, ") though each of the ",
                              result.count, " examples' losses is (", overflow_cause(model), ")"));
  result.accuracy = static_cast<double>(correct) / static_cast<double>(result.count);
  return result;
}

Evaluation evaluate(nn::SequenceClassifier& model, const std::vector<Example>& examples, const Vocab& vocab,
                    const std::vector<std::string>& labels) {
  return evaluate(model, examples, vocab, labels,
                  evaluation_tokens(TrainOptions().batch_size, model.options().context_length));
}

}  // namespace tapegrad
