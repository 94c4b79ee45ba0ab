#pragma once
// Publishing a run's step: metrics.csv, curves.svg and a checkpoint, made `latest` (and `best`) only once
// whole and finite; and the messages of a run that stops early, which say which checkpoint is intact.
#include <cstdint>
#include <string>

#include "autograd/error.h"
#include "train/run_state.h"

namespace tapegrad {

/// Writes metrics.csv, curves.svg and a checkpoint of run.step into run.options.out, and publishes it as
/// `latest` (and `best`); `elapsed` is the run's wall-clock seconds so far, for trainer.json. Weights that
/// are not finite are never published (the diverged() error); a failed write is an IOError saying which
/// file, why, and which checkpoint is still intact (the folder being written is removed, the links never
/// moved).
void publish_step(Run& run, bool is_best, double elapsed);

/// What a run that stops early leaves behind, for its last message: "the checkpoint of step 40 in runs/x is
/// intact", or that none was saved yet.
std::string kept_checkpoint(const Run& run);

/// The error that stops a run whose numbers stopped being finite at `step` (`what` says which: "loss nan",
/// "parameter 'w' element 3 is inf after the update"), naming the last good checkpoint.
ValueError diverged(const Run& run, int64_t step, const std::string& what);

}  // namespace tapegrad
