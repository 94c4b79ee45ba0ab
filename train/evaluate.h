#pragma once
// Inference over many texts: the logits of id sequences in memory-bounded batches without the tape, and
// the evaluation of labelled examples (loss, accuracy, confusion matrix) built on it.
//
// The batch rule. An evaluation batch holds at most as many tokens (padded positions counted) as a
// training batch of full-length sequences, batch_size x context_length. Training keeps every layer's
// activations alive until backward; a forward under NoGradGuard keeps only those of the layer it is in
// (each layer's input dies when the next layer's output replaces it), so an evaluation batch needs a
// fraction of a training step's memory and validating never raises the peak that training sets.
// Sequences are batched by length, longest first, so that a batch pads little: a batch of length-T
// sequences holds max_tokens / T of them.
//
// Outputs that cannot be trusted are errors, not results: a NaN or infinite logit (from finite weights,
// when the forward overflows: huge weights, or a tiny attention temperature) or a non-finite loss is a
// NonFiniteOutput, so predict, eval and the validation inside training never report them as numbers
// (JSON would print null, a table "nan", and argmax a label anyway).
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "nn/classifier.h"
#include "train/report/confusion.h"
#include "train/data/tasks.h"
#include "train/data/vocab.h"

namespace tapegrad {

/// The token budget of an evaluation batch: train_batch_size x context_length (see the batch rule above).
int64_t evaluation_tokens(int64_t train_batch_size, int64_t context_length);

/// A NaN or infinite logit or loss. sequence is the index (from 0) of the text or example whose logit
/// class_index has the value; -1 when the error is not about one logit (a loss).
struct NonFiniteOutput : ValueError {
  NonFiniteOutput(const std::string& what, int64_t sequence = -1, int64_t class_index = -1, double value = 0)
      : ValueError(what), sequence(sequence), class_index(class_index), value(value) {}
  int64_t sequence, class_index;
  double value;
};

/// Why a model with finite weights gives a non-finite output, as facts about it: "from finite weights of
/// norm 3.2e+31 (largest |w| 1e+30 in 'embed.weight'): the float32 forward overflows", naming the attention
/// temperature too when it is not 1 (the scores are divided by it).
std::string overflow_cause(const nn::Module& model, const nn::ClassifierOptions& options);
inline std::string overflow_cause(const nn::SequenceClassifier& model) { return overflow_cause(model, model.options()); }

/// Logits of every sequence, in the order given, in eval mode under NoGradGuard (the model's mode is
/// restored after), in batches of at most max_tokens padded tokens (at least one sequence each). A
/// sequence's logits do not depend on the batch it lands in: padding is masked out of attention and pooling.
/// A NaN or infinite logit is a NonFiniteOutput naming the first such sequence (in the order given) and
/// the overflow_cause().
// sequences: N non-empty id lists -> logits: (N, K) in the model's dtype
Tensor classify(nn::SequenceClassifier& model, const std::vector<std::vector<int64_t>>& sequences, int64_t max_tokens);

struct Evaluation {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct
  int64_t count = 0;
  int64_t truncated = 0;
  Confusion confusion;  // (true class, predicted class) -> count, sparse
};

/// Loss, accuracy and confusion matrix of the model on the examples, through classify() with a budget
/// of max_tokens per batch. The loss of each example, log sum_j exp(z_j) - z_target, is computed in
/// double from its logits and summed in example order, so the result does not depend on the batching.
/// A non-finite logit, example loss or mean loss is a NonFiniteOutput naming the example; except when the
/// model's weights are themselves not finite (only training can make them so: load_model refuses them),
/// where loss and accuracy are NaN and the caller's check of the weights says more (train names the step,
/// the parameter and the checkpoint kept, and publishes nothing).
Evaluation evaluate(nn::SequenceClassifier& model, const std::vector<Example>& examples, const Vocab& vocab,
                    const std::vector<std::string>& labels, int64_t max_tokens);
/// The same with the budget of `tapegrad train`'s default batch size.
Evaluation evaluate(nn::SequenceClassifier& model, const std::vector<Example>& examples, const Vocab& vocab,
                    const std::vector<std::string>& labels);

}  // namespace tapegrad
