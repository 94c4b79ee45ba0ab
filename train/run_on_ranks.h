#pragma once
// A training run over several ranks (docs/distributed.md): the set-up the ranks agree on and what the ranks
// hand rank 0 before it writes a checkpoint (the step and validation, the same code for one process and for
// ranks, are training_step.h's). The trainer calls these only when the run has more than one rank: a run of
// one process never reaches them.
#include <cstdint>
#include <string>
#include <utility>

#include "train/evaluate.h"
#include "train/run_state.h"

namespace tapegrad {

/// The ranks' part of a run's set-up, once each has tried its own (`error`: what went wrong on this rank,
/// or empty): they agree that it worked and on its settings (an AgreedError otherwise), rank 0 makes the
/// run directory and every rank must see it, the hosts are counted, every rank takes rank 0's weights and
/// optimizer state, and run.ranks.averager is made.
void join_ranks(Run& run, const std::string& error, const DataParallelOptions& parallel);

/// The dropout stream of a rank other than 0 with no saved state, from rank 0's seed, the rank and the step
/// (rank 0's is the one-process run's).
Generator rank_dropout_stream(uint64_t rank0_seed, int rank, int64_t step);

/// Before rank 0 writes a checkpoint: every rank's dropout stream state into run.ranks.rank_dropout (for
/// trainer.json), and a check that the ranks' weights are still the same bits (averaging keeps them so; a
/// rank that drifted, with other code or a fault, is an AgreedError).
void gather_rank_state(Run& run);

}  // namespace tapegrad
