#pragma once
// The model a run trains, as the training loop sees it: what a batch's loss is, what evaluation reports, and
// what a checkpoint records to rebuild it. The loop (training_loop.h), the step (training_step.h) and a
// checkpoint's publishing (publish_run.h) know this interface only, so that another kind of model (a
// language model: the next token's loss, perplexity) plugs in beside the classifier (classifier_model.h)
// without editing them.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"
#include "train/data/example.h"
#include "train/evaluate.h"

#include <nlohmann/json.hpp>

namespace tapegrad {

/// The loss of one batch, with the tape to differentiate it.
struct BatchLoss {
  Tensor task;       // () the mean loss of the task: what rows report and validation compares with
  Tensor auxiliary;  // () an objective the model adds in training (moe's load balancing), weighted; or undefined
  int64_t truncated = 0;  // examples cut to the context length
};

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  /// The parameters the optimizer updates, the train/eval mode, the state a checkpoint saves.
  virtual nn::Module& module() = 0;
  const nn::Module& module() const { return const_cast<TrainableModel*>(this)->module(); }

  /// The loss of these examples, forward in the module's current mode, with the tape.
  virtual BatchLoss loss(const std::vector<Example>& examples) = 0;

  /// The examples evaluated without the tape, in eval mode (the mode is restored after), in batches of at most
  /// max_tokens tokens: mean loss, accuracy, count. A non-finite output from finite weights is a NonFiniteOutput.
  virtual Evaluation evaluate(const std::vector<Example>& examples, int64_t max_tokens) = 0;

  /// config.json: everything that, with the weights, rebuilds this model, and its kind ("kind": "classifier"),
  /// so that a reader knows which model a checkpoint holds before reading the rest.
  virtual nlohmann::json config() const = 0;
};

}  // namespace tapegrad
