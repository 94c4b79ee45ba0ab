#pragma once
// Evaluation of a classifier on labelled examples: loss, accuracy and the confusion matrix.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/classifier.h"
#include "train/tasks.h"
#include "train/vocab.h"

namespace tapegrad {

struct Evaluation {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct
  int64_t count = 0;
  int64_t truncated = 0;
  std::vector<std::vector<int64_t>> confusion;  // [true class][predicted class]
};

/// Runs the model in eval mode under NoGradGuard over the examples in batches (restores its mode after).
Evaluation evaluate(nn::SequenceClassifier& model, const std::vector<Example>& examples, const Vocab& vocab,
                    const std::vector<std::string>& labels, int64_t batch_size = 256);

}  // namespace tapegrad
