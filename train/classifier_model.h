#pragma once
// The sequence classifier as a run trains it (trainable_model.h): texts become id batches through the run's
// vocabulary, the loss is the cross-entropy of the class logits (plus the blocks' auxiliary objective),
// evaluation is evaluate() (evaluate.h), and config.json is the classifier's options.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/classifier.h"
#include "train/data/vocab.h"
#include "train/trainable_model.h"

namespace tapegrad {

class ClassifierModel : public TrainableModel {
 public:
  /// vocab and labels are the run's data; they must outlive this.
  ClassifierModel(std::unique_ptr<nn::SequenceClassifier> classifier, const Vocab& vocab,
                  const std::vector<std::string>& labels);

  nn::Module& module() override { return *classifier_; }
  ///   cross_entropy(classifier(ids), targets) [+ the encoder layers' auxiliary_loss()]
  BatchLoss loss(const std::vector<Example>& examples) override;
  Evaluation evaluate(const std::vector<Example>& examples, int64_t max_tokens) override;
  nlohmann::json config() const override;

  const nn::SequenceClassifier& classifier() const { return *classifier_; }

 private:
  std::unique_ptr<nn::SequenceClassifier> classifier_;
  const Vocab& vocab_;
  const std::vector<std::string>& labels_;
};

}  // namespace tapegrad
