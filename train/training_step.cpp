#include "train/training_step.h"

#include <array>
#include <cmath>
#include <csignal>

#include "autograd/autograd.h"

namespace tapegrad {

StepLosses forward_backward(TrainableModel& model, optim::Optimizer& optimizer, const std::vector<Example>& batch,
                            RunRanks& ranks, int signal) {
  const Communicator& comm = *ranks.comm;
  const int64_t m = static_cast<int64_t>(batch.size());
  const auto [begin, end] = share_of(m, comm.rank(), comm.size());
  // task loss x n, auxiliary loss x n, sequences cut to the context, SIGINTs, other stops
  std::array<double, 5> sums = {0, 0, 0, signal == SIGINT ? 1.0 : 0.0, signal != 0 && signal != SIGINT ? 1.0 : 0.0};
  optimizer.zero_grad();
  if (end > begin) {
    const int64_t n = end - begin;
    // One process's share is the whole batch: no copy of its examples on the step's path.
    const BatchLoss loss = n == m ? model.loss(batch) : model.loss({batch.begin() + begin, batch.begin() + end});
    const Tensor total = loss.auxiliary.defined() ? loss.task + loss.auxiliary : loss.task;
    if (ranks.averager)
      ranks.averager->backward(total, n, m);
    else
      backward(total);
    // item(): the one float a step reads back. Float32 times n < 2^29 is exact in double, so on one process
    // (n = m) the division below gives the float back unchanged.
    sums[0] = loss.task.item() * static_cast<double>(n);
    if (loss.auxiliary.defined()) sums[1] = loss.auxiliary.item() * static_cast<double>(n);
    sums[2] = static_cast<double>(loss.truncated);
  }
  if (ranks.averager) {
    ranks.averager->finish(sums);
    if (sums[3] > 0)
      ranks.agreed_stop = SIGINT;
    else if (sums[4] > 0)
      ranks.agreed_stop = SIGTERM;
  }
  return {sums[0] / static_cast<double>(m), sums[1] / static_cast<double>(m), static_cast<int64_t>(sums[2])};
}

Evaluation evaluate_on_ranks(TrainableModel& model, const std::vector<Example>& valid, const RunRanks& ranks,
                             int64_t max_tokens) {
  const Communicator& comm = *ranks.comm;
  if (!ranks.several()) return model.evaluate(valid, max_tokens);
  const auto [begin, end] = share_of(static_cast<int64_t>(valid.size()), comm.rank(), comm.size());
  Evaluation eval = model.evaluate({valid.begin() + begin, valid.begin() + end}, max_tokens);
  std::array<double, 3> sums = {eval.loss * static_cast<double>(eval.count),
                                std::round(eval.accuracy * static_cast<double>(eval.count)),
                                static_cast<double>(eval.count)};
  ranks.comm->sum(sums);
  eval.loss = sums[0] / sums[2];
  eval.accuracy = sums[1] / sums[2];
  eval.count = static_cast<int64_t>(sums[2]);
  return eval;
}

}  // namespace tapegrad
