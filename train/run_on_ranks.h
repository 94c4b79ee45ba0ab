#pragma once
// A training run over several ranks (docs/distributed.md): the set-up the ranks agree on, a step on each
// rank's share of the batch, validation split over the ranks, and what the ranks hand rank 0 before it
// writes a checkpoint. The trainer calls these only when run.comm has more than one rank: a run of one
// process never reaches them.
#include <cstdint>
#include <string>
#include <utility>

#include "train/evaluate.h"
#include "train/run_state.h"

namespace tapegrad {

/// The ranks' part of a run's set-up, once each has tried its own (`error`: what went wrong on this rank,
/// or empty): they agree that it worked and on its settings (an AgreedError otherwise), rank 0 makes the
/// run directory and every rank must see it, the hosts are counted, every rank takes rank 0's weights and
/// optimizer state, and run.averager is made.
void join_ranks(Run& run, const std::string& error, const DataParallelOptions& parallel);

/// The dropout stream of a rank other than 0 with no saved state, from rank 0's seed, the rank and the step
/// (rank 0's is the one-process run's).
Generator rank_dropout_stream(uint64_t rank0_seed, int rank, int64_t step);

/// One step of data-parallel training, on every rank: the next batch of batch_size x ranks examples (every
/// rank draws the same, so that the stream's position is one for all), this rank's share of it forward and
/// backward, and the gradients averaged over the ranks. Returns the task loss and the auxiliary loss of the
/// whole batch (summed over the ranks: every rank sees the same numbers, so that all stop together when they
/// are not finite). `signal` is one this rank received (0: none); a stop asked of any rank becomes
/// run.agreed_stop on every rank.
std::pair<double, double> data_parallel_step(Run& run, int signal);

/// This rank's share of the validation set evaluated, and the losses and correct answers added over the
/// ranks in rank order: the same numbers on every rank, so that they agree on the best step and the target.
Evaluation validate_on_ranks(Run& run, int64_t max_tokens);

/// Before rank 0 writes a checkpoint: every rank's dropout stream state into run.rank_dropout (for
/// trainer.json), and a check that the ranks' weights are still the same bits (averaging keeps them so; a
/// rank that drifted, with other code or a fault, is an AgreedError).
void gather_rank_state(Run& run);

}  // namespace tapegrad
