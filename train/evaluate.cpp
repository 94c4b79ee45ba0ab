#include "train/evaluate.h"

#include "autograd/autograd.h"
#include "train/batching.h"

namespace tapegrad {

Evaluation evaluate(nn::SequenceClassifier& model, const std::vector<Example>& examples, const Vocab& vocab,
                    const std::vector<std::string>& labels, int64_t batch_size) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  Evaluation result;
  const int64_t classes = static_cast<int64_t>(labels.size());
  result.confusion.assign(classes, std::vector<int64_t>(classes, 0));
  double loss_sum = 0;
  int64_t correct = 0;
  const bool cls = model.options().pool == nn::Pooling::cls;
  for (size_t start = 0; start < examples.size(); start += batch_size) {
    const size_t end = std::min(examples.size(), start + static_cast<size_t>(batch_size));
    const std::vector<Example> chunk(examples.begin() + start, examples.begin() + end);
    const Batch batch = make_batch(chunk, vocab, labels, model.options().context_length, cls);
    result.truncated += batch.truncated;
    const Tensor logits = model.forward(batch.ids, batch.key_padding_mask);
    loss_sum += cross_entropy(logits, batch.targets).item() * static_cast<double>(chunk.size());
    const std::vector<int64_t> predicted = argmax(logits, -1).to_int_vector();
    const std::vector<int64_t> targets = batch.targets.to_int_vector();
    for (size_t i = 0; i < predicted.size(); ++i) {
      correct += predicted[i] == targets[i];
      ++result.confusion[targets[i]][predicted[i]];
    }
  }
  result.count = static_cast<int64_t>(examples.size());
  if (result.count > 0) {
    result.loss = loss_sum / static_cast<double>(result.count);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.count);
  }
  model.train(was_training);
  return result;
}

}  // namespace tapegrad
