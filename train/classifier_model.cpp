#include "train/classifier_model.h"

#include <utility>

#include "autograd/autograd.h"
#include "train/checkpoint/model_config.h"
#include "train/data/batching.h"

namespace tapegrad {

ClassifierModel::ClassifierModel(std::unique_ptr<nn::SequenceClassifier> classifier, const Vocab& vocab,
                                 const std::vector<std::string>& labels)
    : classifier_(std::move(classifier)), vocab_(vocab), labels_(labels) {}

BatchLoss ClassifierModel::loss(const std::vector<Example>& examples) {
  const nn::ClassifierOptions& o = classifier_->options();
  const Batch batch = make_batch(examples, vocab_, labels_, o.context_length, nn::prepends_cls(o));
  const Tensor logits = classifier_->forward(batch.ids, batch.key_padding_mask);
  // Blocks with a training objective of their own (moe's load balancing) add it, already weighted; the task
  // loss stays the one rows report, comparable with the validation loss.
  return {cross_entropy(logits, batch.targets), classifier_->auxiliary_loss(), batch.truncated};
}

Evaluation ClassifierModel::evaluate(const std::vector<Example>& examples, int64_t max_tokens) {
  return tapegrad::evaluate(*classifier_, examples, vocab_, labels_, max_tokens);
}

nlohmann::json ClassifierModel::config() const {
  nlohmann::json config = {{"kind", kClassifierKind}};
  config.update(model_config_json(classifier_->options()));
  return config;
}

}  // namespace tapegrad
