#pragma once
// One training step and one validation, the same code on one process and on the ranks of mpirun. On one
// process a rank's share of a batch is the whole batch and nothing is added over ranks.
#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "train/data/example.h"
#include "train/evaluate.h"
#include "train/run_state.h"
#include "train/trainable_model.h"

namespace tapegrad {

/// What one step's forward and backward report.
struct StepLosses {
  double task = 0, auxiliary = 0;  // the batch's mean losses (over every rank's share)
  int64_t truncated = 0;           // the batch's examples cut to the context length
};

/// The gradients of one step, left in the parameters for the optimizer: the model's loss on this process's
/// share of `batch` (share_of: every rank draws the same batch, so the stream's position is one for all),
/// backward, and over several ranks the gradients averaged (ranks.averager) and the losses added, so that every
/// rank sees the same numbers and all stop together when they are not finite. `signal`: one this process
/// received (0: none); over several ranks a stop asked of any becomes ranks.agreed_stop on every rank.
StepLosses forward_backward(TrainableModel& model, optim::Optimizer& optimizer, const std::vector<Example>& batch,
                            RunRanks& ranks, int signal);

/// The validation set evaluated: on several ranks each its share, the losses and correct answers added in
/// rank order, so that every rank has the same numbers and agrees on the best step and the target.
Evaluation evaluate_on_ranks(TrainableModel& model, const std::vector<Example>& valid, const RunRanks& ranks,
                             int64_t max_tokens);

}  // namespace tapegrad
